// Package ami resolves an EC2NodeClass's spec.amiSelectorTerms to AMIs,
// each carrying the node requirements of the instance types it can boot,
// and picks the AMI for an instance type.
//
// An alias term ("al2023@latest", "bottlerocket@1.30.0", "al2@latest")
// reads the public SSM parameters of every architecture and accelerator
// variant of the family for the configured Kubernetes version (see
// AliasParameters for the exact paths), then calls DescribeImages for the
// IDs found. A parameter that does not exist (ParameterNotFound) is skipped:
// not every variant exists for every version. The other terms (id, name,
// tags, owner, ssmParameter) query DescribeImages directly.
//
// Requirements follow Karpenter's AMI variants: every AMI requires its
// kubernetes.io/arch; a standard AMI also requires that
// karpenter.k8s.aws/instance-gpu-count and
// karpenter.k8s.aws/instance-accelerator-count do not exist; an nvidia AMI
// requires instance-gpu-count to exist; a neuron AMI requires
// instance-accelerator-count to exist. For AMIs not found through an alias,
// the variant is inferred from EKS-optimized AMI names when recognisable
// (for example "amazon-eks-node-al2023-x86_64-nvidia-1.35-v20251101") and
// otherwise only the architecture is required.
//
// Select matches strictly: an instance type gets an AMI only if it meets
// every requirement of that AMI, and among those the one with the most
// requirements (the most specific fit) wins, then non-deprecated, then the
// newest, then the lowest ID. So g5.xlarge gets the x86_64 nvidia AMI,
// g5g.xlarge the arm64 nvidia AMI and m5.large the x86_64 standard AMI,
// whatever order DescribeImages returned them in (the failure mode of
// aws/karpenter-provider-aws#7925).
//
// SSM lookups are cached for cache.SSMTTL and resolutions for
// cache.DefaultTTL.
package ami
