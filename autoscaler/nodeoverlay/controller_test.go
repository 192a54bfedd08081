package nodeoverlay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// cloud returns fixed instance types for every NodePool but "broken".
type cloud struct {
	cloudprovider.CloudProvider
	its []*cloudprovider.InstanceType
}

func (c *cloud) GetInstanceTypes(_ context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	if np.Name == "broken" {
		return nil, &cloudprovider.NodeClassNotReadyError{NodeClass: "broken", Reason: "not found"}
	}
	return c.its, nil
}

// TestControllerWritesConditionsAndStore: one reconcile writes
// ValidationSucceeded True on the applied overlay, False with reason
// Conflict on its equal-weight rival and RuntimeValidation on an invalid
// one (at the injected clock's time), fills the store for the NodePools
// whose instance types it read, calls OnUpdate, and returns the error of
// the NodePool it could not read so the request is retried; the
// decorated cloud provider then returns overlaid types for the evaluated
// NodePool and UnevaluatedNodePoolError for the other.
func TestControllerWritesConditionsAndStore(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	objs := []client.Object{nodePool("default", nil), nodePool("broken", nil)}
	for _, o := range []v1alpha1.NodeOverlay{
		overlay("b-dear", 5, "9", "", nil, in("node.kubernetes.io/instance-type", "c5.large")),
		overlay("a-rival", 5, "0.001", "", nil, in("node.kubernetes.io/instance-type", "c5.large")),
		overlay("restricted", 1, "1", "", nil, in("kubernetes.io/hostname", "x")),
	} {
		objs = append(objs, o.DeepCopy())
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&v1alpha1.NodeOverlay{}).Build()
	cp := &cloud{its: pools()[0].InstanceTypes}
	store := NewStore()
	c := NewController(kube, cp, store, clocktesting.NewFakeClock(now), logr.Discard())
	updates := 0
	c.OnUpdate = func() { updates++ }
	_, err := c.Reconcile(context.Background(), reconcile.Request{})
	var notReady *cloudprovider.NodeClassNotReadyError
	if !errors.As(err, &notReady) {
		t.Fatalf("Reconcile: %v; want the broken NodePool's NodeClassNotReadyError", err)
	}
	if updates != 1 {
		t.Errorf("OnUpdate called %d times; want 1", updates)
	}
	for name, want := range map[string]string{"b-dear": "True/ValidationSucceeded", "a-rival": "False/Conflict", "restricted": "False/RuntimeValidation"} {
		var o v1alpha1.NodeOverlay
		if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, &o); err != nil {
			t.Fatal(err)
		}
		cond := o.StatusConditions().Get(ConditionTypeValidationSucceeded)
		if cond == nil || string(cond.Status)+"/"+cond.Reason != want || !cond.LastTransitionTime.Time.Equal(now) {
			t.Errorf("%s: %+v; want %s at %s", name, cond, want, now)
		}
		if ready := o.StatusConditions().Root(); ready == nil || (ready.Status == metav1.ConditionTrue) != (want == "True/ValidationSucceeded") {
			t.Errorf("%s: Ready %+v; want it to follow ValidationSucceeded", name, ready)
		}
	}
	decorated := Decorate(cp, store)
	its, err := decorated.GetInstanceTypes(context.Background(), nodePool("default", nil))
	if err != nil {
		t.Fatal(err)
	}
	if p, by := price(its, "c5.large", "us-east-1a", "on-demand"); p != 9 || by != "b-dear" {
		t.Errorf("c5.large: $%v by %q; want $9 by b-dear", p, by)
	}
	var unevaluated *UnevaluatedNodePoolError
	if _, err := decorated.GetInstanceTypes(context.Background(), nodePool("other", nil)); !errors.As(err, &unevaluated) {
		t.Errorf("an unevaluated NodePool: %v; want UnevaluatedNodePoolError", err)
	}
}
