// Package v1 holds karpx's Go type for the EC2NodeClass resource
// (group karpenter.k8s.aws, version v1).
//
// The type is wire-compatible with upstream Karpenter's EC2NodeClass: every
// field keeps its upstream JSON name and meaning, so a manifest written for
// aws/karpenter-provider-aws v1 decodes here unchanged and karpx can run
// beside (or instead of) upstream Karpenter on the same objects. karpx's own
// type exists because the upstream provider module does not resolve with the
// Go toolchain this project pins.
//
// The CRD under manifests/crds is generated from these types by
// `make generate` (controller-gen).
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1
