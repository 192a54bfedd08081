package scheme

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
)

// KarpenterV1 is the group and version of NodePool and NodeClaim,
// karpenter.sh/v1.
var KarpenterV1 = schema.GroupVersion{Group: karpapis.Group, Version: "v1"}

// KarpenterV1alpha1 is the group and version of NodeOverlay,
// karpenter.sh/v1alpha1.
var KarpenterV1alpha1 = schema.GroupVersion{Group: karpapis.Group, Version: "v1alpha1"}

// New returns a new scheme holding the built-in Kubernetes kinds,
// Karpenter's karpenter.sh/v1 NodePool and NodeClaim and karpenter.sh/v1alpha1
// NodeOverlay (and their lists), and
// karpx's karpenter.k8s.aws/v1 EC2NodeClass. Each call returns a fresh
// scheme, so callers may add kinds of their own to it.
//
// Karpenter's API package registers its kinds only into client-go's global
// scheme, so they are added here explicitly.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	// AddToScheme fails only on conflicting registrations in a fresh
	// scheme, which is a programming error.
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(karpxv1.AddToScheme(s))
	s.AddKnownTypes(KarpenterV1,
		&karpv1.NodePool{}, &karpv1.NodePoolList{},
		&karpv1.NodeClaim{}, &karpv1.NodeClaimList{},
	)
	metav1.AddToGroupVersion(s, KarpenterV1)
	s.AddKnownTypes(KarpenterV1alpha1, &v1alpha1.NodeOverlay{}, &v1alpha1.NodeOverlayList{})
	metav1.AddToGroupVersion(s, KarpenterV1alpha1)
	return s
}
