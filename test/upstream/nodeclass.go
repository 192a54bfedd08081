package upstream

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kwokapis "sigs.k8s.io/karpenter/kwok/apis"
	"sigs.k8s.io/karpenter/kwok/apis/v1alpha1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	karpxscheme "github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/ec2sim"
)

// NodeClassGroupVersion is the group and version of KWOKNodeClass,
// karpenter.kwok.sh/v1alpha1.
var NodeClassGroupVersion = schema.GroupVersion{Group: kwokapis.Group, Version: "v1alpha1"}

// NodeClassKind is the kind a NodePool's nodeClassRef names for Karpenter's
// kwok provider.
const NodeClassKind = "KWOKNodeClass"

// NewScheme returns karpx's scheme (apis/scheme.New: built-in kinds,
// NodePool, NodeClaim, EC2NodeClass) with KWOKNodeClass and its list added.
func NewScheme() *runtime.Scheme {
	s := karpxscheme.New()
	s.AddKnownTypes(NodeClassGroupVersion, &v1alpha1.KWOKNodeClass{}, &v1alpha1.KWOKNodeClassList{})
	metav1.AddToGroupVersion(s, NodeClassGroupVersion)
	return s
}

// RegistrationDelay returns the KWOKNodeClass spec.nodeRegistrationDelay
// that gives Karpenter's kwok provider ec2sim's simulated boot: sim's time
// from launch to Node, PendingDelay (the instance is "pending", then
// "running") plus BootDelay (kubelet start and registration), defaults
// applied as ec2sim.New applies them (200ms + 1s). Karpenter's kwok
// provider answers Create at once and creates the Node
// nodeRegistrationDelay later, the provider's own model of instance start
// time; the Node has no Ready condition until the cluster's kwok controller
// sets it, for both sides alike.
//
// The KWOKNodeClass CRD accepts whole seconds, minutes and hours only
// (pattern ^([0-9]+(s|m|h))+$), so it returns an error, naming the fields
// to change, when the sum is not a whole number of seconds; it also
// returns ec2sim.New's errors for an invalid sim.
func RegistrationDelay(sim ec2sim.Config) (time.Duration, error) {
	s, err := ec2sim.New(sim)
	if err != nil {
		return 0, err
	}
	cfg := s.Config()
	d := cfg.PendingDelay + cfg.BootDelay
	if d%time.Second != 0 {
		return 0, fmt.Errorf("ec2sim PendingDelay %s + BootDelay %s = %s: KWOKNodeClass spec.nodeRegistrationDelay takes whole seconds; set ec2sim.Config.BootDelay so that the sum is one (e.g. PendingDelay 200ms, BootDelay 800ms)", cfg.PendingDelay, cfg.BootDelay, d)
	}
	return d, nil
}

// NodeClass returns a KWOKNodeClass named name whose Nodes register
// registrationDelay after launch (see RegistrationDelay). It returns an
// error when registrationDelay is negative or not a whole number of
// seconds, which the CRD would refuse.
func NodeClass(name string, registrationDelay time.Duration) (*v1alpha1.KWOKNodeClass, error) {
	if registrationDelay < 0 || registrationDelay%time.Second != 0 {
		return nil, fmt.Errorf("KWOKNodeClass %s: spec.nodeRegistrationDelay %s must be a whole, non-negative number of seconds", name, registrationDelay)
	}
	nc := &v1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	nc.SetGroupVersionKind(NodeClassGroupVersion.WithKind(NodeClassKind))
	if registrationDelay > 0 {
		nc.Spec.NodeRegistrationDelay = metav1.Duration{Duration: registrationDelay}
	}
	return nc, nil
}

// Translate returns a copy of np whose nodeClassRef names the
// KWOKNodeClass of the same name (group karpenter.kwok.sh, kind
// KWOKNodeClass); nothing else changes. It returns an error when np has no
// nodeClassRef name.
func Translate(np *karpv1.NodePool) (*karpv1.NodePool, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("NodePool %s: spec.template.spec.nodeClassRef.name is empty; set it to the node class to translate", np.Name)
	}
	out := np.DeepCopy()
	out.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokapis.Group, Kind: NodeClassKind, Name: ref.Name}
	return out, nil
}

// ApplyNodePool creates the KWOKNodeClass that Translate(np) refers to
// (NodeClass(name, registrationDelay); an existing one is left as it is)
// and the translated NodePool, with kube (whose scheme must hold
// KWOKNodeClass: NewScheme). It returns the created NodePool, or the
// errors of Translate, NodeClass and the API server.
func ApplyNodePool(ctx context.Context, kube client.Client, np *karpv1.NodePool, registrationDelay time.Duration) (*karpv1.NodePool, error) {
	out, err := Translate(np)
	if err != nil {
		return nil, err
	}
	nc, err := NodeClass(out.Spec.Template.Spec.NodeClassRef.Name, registrationDelay)
	if err != nil {
		return nil, err
	}
	if err := kube.Create(ctx, nc); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating KWOKNodeClass %s: %w", nc.Name, err)
	}
	if err := kube.Create(ctx, out); err != nil {
		return nil, fmt.Errorf("creating NodePool %s: %w", out.Name, err)
	}
	return out, nil
}
