package cluster

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
)

// Karpenter's API resources that the subcommands read, as served by the
// karpenter.sh/v1 and karpenter.k8s.aws/v1 CRDs.
var (
	// KarpenterV1 is the group and version of NodePool and NodeClaim,
	// karpenter.sh/v1.
	KarpenterV1 = schema.GroupVersion{Group: karpapis.Group, Version: "v1"}

	// NodePoolsResource is karpenter.sh/v1, resource nodepools.
	NodePoolsResource = KarpenterV1.WithResource("nodepools")
	// NodeClaimsResource is karpenter.sh/v1, resource nodeclaims.
	NodeClaimsResource = KarpenterV1.WithResource("nodeclaims")
	// EC2NodeClassesResource is karpenter.k8s.aws/v1, resource ec2nodeclasses.
	EC2NodeClassesResource = karpxv1.SchemeGroupVersion.WithResource("ec2nodeclasses")
)

// NewScheme returns a new scheme holding the built-in Kubernetes kinds,
// Karpenter's karpenter.sh/v1 NodePool and NodeClaim (and their lists), and
// karpx's karpenter.k8s.aws/v1 EC2NodeClass. Each call returns a fresh
// scheme, so callers may add kinds of their own to it.
//
// Karpenter's API package registers its kinds only into client-go's global
// scheme, so they are added here explicitly.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// AddToScheme fails only on conflicting registrations in a fresh
	// scheme, which is a programming error.
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(karpxv1.AddToScheme(s))
	addKarpenterV1(s, KarpenterV1)
	return s
}

func addKarpenterV1(s *runtime.Scheme, gv schema.GroupVersion) {
	s.AddKnownTypes(gv,
		&karpv1.NodePool{}, &karpv1.NodePoolList{},
		&karpv1.NodeClaim{}, &karpv1.NodeClaimList{},
	)
	metav1.AddToGroupVersion(s, gv)
}
