package cluster

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpx/karpx/apis/scheme"
	karpxv1 "github.com/karpx/karpx/apis/v1"
)

// Karpenter's API resources that the subcommands read, as served by the
// karpenter.sh/v1 and karpenter.k8s.aws/v1 CRDs.
var (
	// KarpenterV1 is the group and version of NodePool and NodeClaim,
	// karpenter.sh/v1.
	KarpenterV1 = scheme.KarpenterV1

	// NodePoolsResource is karpenter.sh/v1, resource nodepools.
	NodePoolsResource = KarpenterV1.WithResource("nodepools")
	// NodeClaimsResource is karpenter.sh/v1, resource nodeclaims.
	NodeClaimsResource = KarpenterV1.WithResource("nodeclaims")
	// EC2NodeClassesResource is karpenter.k8s.aws/v1, resource ec2nodeclasses.
	EC2NodeClassesResource = karpxv1.SchemeGroupVersion.WithResource("ec2nodeclasses")
)

// NewScheme returns a new scheme holding the built-in Kubernetes kinds,
// NodePool, NodeClaim and EC2NodeClass (apis/scheme.New).
func NewScheme() *runtime.Scheme {
	return scheme.New()
}
