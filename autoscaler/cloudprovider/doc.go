// Package cloudprovider is the seam between karpx's cloud-agnostic
// controllers (provisioning, NodeClaim lifecycle, disruption) and the cloud:
// the CloudProvider interface, the InstanceType and Offering values the
// scheduler packs pods onto, and the typed errors controllers branch on.
//
// Controllers call a CloudProvider and never an SDK; the AWS implementation
// lives in autoscaler/aws/cloudprovider, with every EC2 call (and its
// throttling, batching and caching) below it.
package cloudprovider
