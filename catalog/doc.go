// Package catalog is the real EC2 instance-type catalogue that karpx's
// autoscaler, simulator, webhook and plugin share: 1,363 instance types, each
// with its Karpenter well-known labels, its allocatable resources on an
// AL2023 node, and its us-east-1 Linux on-demand price.
//
// The data is embedded from aws-instance-types.json, extracted from the public
// aws/karpenter-provider-aws repository; Source reports the commit and files.
// Callers get values, never pointers into the shared table, so nothing can
// change the catalogue at run time.
package catalog
