// Package crdschema validates custom resources offline the way
// kube-apiserver validates them on create: unknown fields are rejected (as
// kubectl's default --validate=strict asks), schema defaults are applied,
// and then the CRD's OpenAPI v3 schema and its x-kubernetes-validations
// CEL rules are checked, with k8s.io/apiextensions-apiserver's own code, so
// the messages are the API server's. `kubectl karpx lint` uses it with the
// CRDs of manifests/crds.
package crdschema
