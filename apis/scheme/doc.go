// Package scheme builds the runtime.Scheme every karpx binary and test
// reads and writes Kubernetes objects with: the built-in kinds, Karpenter's
// karpenter.sh/v1 NodePool and NodeClaim, and karpx's karpenter.k8s.aws/v1
// EC2NodeClass.
package scheme
