// Package scheme builds the runtime.Scheme every karpx binary and test
// reads and writes Kubernetes objects with: the built-in kinds, Karpenter's
// karpenter.sh/v1 NodePool and NodeClaim, karpenter.sh/v1alpha1 NodeOverlay,
// and karpx's karpenter.k8s.aws/v1
// EC2NodeClass.
package scheme
