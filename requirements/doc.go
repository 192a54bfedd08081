// Package requirements is karpx's one implementation of Kubernetes node
// selector requirements (In, NotIn, Exists, DoesNotExist, Gt, Lt and
// Karpenter's Gte, Lte): Requirement parses an expression into the set of
// values it allows, intersects it with others on the same key (Set), and
// matches label values. The scheduler (package scheduling), the AWS cloud
// provider's launch and AMI selection, cluster state, the disruption
// controller and kubectl karpx explain (through scheduling.NodeClaimPlan)
// and the lint rules (KX102, KX103) all use it.
//
// It owns requirement semantics only, and is a leaf like apis and catalog:
// it must not import anything under autoscaler, plugin, webhook, lint or
// ec2sim (test/architecture checks it), so that the lint rules, which the
// webhook and the plugin share, can use it.
//
// Karpenter's sigs.k8s.io/karpenter v1.13.0 pkg/scheduling does the same
// job; BenchmarkMatchCatalogue decided against reusing it: matching the
// general-purpose NodePool's requirements against the 1,363 catalogue
// types takes about 12 times longer with 170 times more allocations (7 vs
// 1,185 per pass), for the same 714 matches (TestAgreesWithKarpenter), and
// importing it pulls k8s.io/cloud-provider and csi-translation-lib into the
// build.
//
// For the AWS providers:
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
//     instead. Zone and capacity type are per offering: see Allows and
//     AllowsOffering.
//
// Parse once (Requirements) when matching many instance types.
package requirements
