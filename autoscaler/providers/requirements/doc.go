// Package requirements evaluates Kubernetes node selector requirements
// (In, NotIn, Exists, DoesNotExist, Gt, Lt and Karpenter's Gte, Lte) against
// the labels of an instance type, with the semantics karpx's AWS providers
// need:
//
//   - MatchLabels is strict and is used for AMI requirements: a missing
//     label satisfies only NotIn and DoesNotExist. This is what makes a GPU
//     AMI ("karpenter.k8s.aws/instance-gpu-count Exists") reject m5.large and
//     a standard AMI ("… DoesNotExist") reject g5.xlarge.
//   - MatchInstanceType is used for NodeClaim and NodePool requirements: it
//     judges only keys that describe the instance type itself
//     (node.kubernetes.io/instance-type, kubernetes.io/arch and os, and
//     karpenter.k8s.aws/instance-*), and ignores every other key
//     (karpenter.sh/nodepool, user labels), which becomes a node label
//     instead. Zone and capacity type are per offering: see Allows.
package requirements
