package capacity

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/aws/capacity"
	"github.com/karpx/karpx/autoscaler/controllers/termination"
)

type observer struct{ seen []string }

func (o *observer) ObserveNode(_ context.Context, n *corev1.Node) (capacity.Key, bool, error) {
	o.seen = append(o.seen, n.Name)
	return capacity.Key{InstanceType: "m5.large", AMIID: "ami-0123456789abcdef0"}, true, nil
}

// TestRecordsAllocatableOnTheNodesNodeClaim: a registered Node's
// allocatable goes to the NodeClaim with its providerID (found through the
// status.providerID index) and to no other; a NodeClaim that already
// records it is left alone.
func TestRecordsAllocatableOnTheNodesNodeClaim(t *testing.T) {
	observed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7134Mi")}
	estimated := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("6903Mi")}
	claim := func(name, providerID string, allocatable corev1.ResourceList) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: karpv1.NodeClaimStatus{ProviderID: providerID, Allocatable: allocatable.DeepCopy()}}
	}
	node := func(name, providerID string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID},
			Status: corev1.NodeStatus{Allocatable: observed.DeepCopy()}}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithIndex(&karpv1.NodeClaim{}, termination.NodeClaimProviderIDField, func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
		}).
		WithStatusSubresource(&karpv1.NodeClaim{}).
		WithObjects(
			claim("a", "aws:///us-east-1a/i-a", estimated), claim("b", "aws:///us-east-1a/i-b", estimated),
			claim("c", "aws:///us-east-1a/i-c", observed),
			node("node-a", "aws:///us-east-1a/i-a"), node("node-c", "aws:///us-east-1a/i-c"),
		).Build()
	obs := &observer{}
	c := New(kube, obs)
	for _, n := range []string{"node-a", "node-c"} {
		if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]corev1.ResourceList{"a": observed, "b": estimated, "c": observed} {
		var nc karpv1.NodeClaim
		if err := kube.Get(context.Background(), types.NamespacedName{Name: name}, &nc); err != nil {
			t.Fatal(err)
		}
		if got := nc.Status.Allocatable[corev1.ResourceMemory]; got.Cmp(want[corev1.ResourceMemory]) != 0 {
			t.Errorf("NodeClaim %s allocatable memory %s, want %s", name, got.String(), want.Memory().String())
		}
	}
	if len(obs.seen) != 2 {
		t.Errorf("observed %v, want both Nodes", obs.seen)
	}
}
