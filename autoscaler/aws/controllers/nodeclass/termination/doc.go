// Package termination is the EC2NodeClass finalizer controller: it adds
// karpenter.k8s.aws/termination to every EC2NodeClass, and when one is
// deleted it holds the deletion until no NodeClaim refers to the class
// (so no instance loses its configuration while it runs), then deletes the
// launch templates karpx created for the class, then the instance profile it
// created for spec.role, and removes the finalizer.
package termination
