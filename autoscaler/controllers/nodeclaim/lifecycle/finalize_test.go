package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

const finalizeProviderID = "aws:///us-east-1a/i-0123456789abcdef0"

// countingCloud counts Delete calls and answers them with err. Every other
// method panics (the embedded interface is nil): finalize makes no Get.
type countingCloud struct {
	cloudprovider.CloudProvider
	err     error
	deletes int
}

func (c *countingCloud) Delete(context.Context, *karpv1.NodeClaim) error {
	c.deletes++
	return c.err
}

// deletedClaim is a launched NodeClaim being deleted; conds are set True.
func deletedClaim(conds ...string) *karpv1.NodeClaim {
	nc := gpuClaim(time.Now().Add(-time.Hour))
	nc.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	nc.Status.ProviderID = finalizeProviderID
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	for _, c := range conds {
		nc.StatusConditions().SetTrue(c)
	}
	return nc
}

func finalizeOnce(t *testing.T, c *Controller) (reconcile.Result, error) {
	t.Helper()
	return c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "gpu-abc"}})
}

// released reports whether the NodeClaim is gone (its finalizer removed).
func released(t *testing.T, kube client.Client) bool {
	t.Helper()
	err := kube.Get(context.Background(), client.ObjectKey{Name: "gpu-abc"}, &karpv1.NodeClaim{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// TestFinalizeTerminatesOnlyWhatTerminationDidNot checks who terminates
// the instance of a deleted NodeClaim whose Node is gone: nobody again when
// the Node's termination recorded InstanceTerminating; finalize itself,
// once, for a NodeClaim that never had a Node (the control: nothing may
// outlive its NodeClaim) and for one whose Node was removed around the
// drain (Registered, no condition).
func TestFinalizeTerminatesOnlyWhatTerminationDidNot(t *testing.T) {
	for _, tt := range []struct {
		name        string
		claim       *karpv1.NodeClaim
		wantDeletes int
	}{
		{"terminated by the Node's termination", deletedClaim(karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInstanceTerminating), 0},
		{"never had a Node (control)", deletedClaim(), 1},
		{"Node force-deleted", deletedClaim(karpv1.ConditionTypeRegistered), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := &countingCloud{}
			c, kube := newTestController(t, time.Now(), tt.claim)
			c.cloud = cloud
			if res, err := finalizeOnce(t, c); err != nil || res.RequeueAfter != 0 {
				t.Fatalf("Reconcile = %+v, %v; want done", res, err)
			}
			if cloud.deletes != tt.wantDeletes {
				t.Errorf("%d Deletes, want %d", cloud.deletes, tt.wantDeletes)
			}
			if !released(t, kube) {
				t.Error("NodeClaim not released")
			}
		})
	}
}

// TestFinalizeReadsPastAStaleCache checks the race between the Node's
// termination and finalize: the cache shows the Node gone but not yet the
// InstanceTerminating condition recorded before it; the API server does,
// and finalize does not terminate again. Control: the API server lacks the
// condition too, and finalize terminates.
func TestFinalizeReadsPastAStaleCache(t *testing.T) {
	for _, tt := range []struct {
		name        string
		fresh       *karpv1.NodeClaim
		wantDeletes int
	}{
		{"API server shows the condition", deletedClaim(karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInstanceTerminating), 0},
		{"API server lacks it (control)", deletedClaim(karpv1.ConditionTypeRegistered), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := &countingCloud{}
			c, kube := newTestController(t, time.Now(), deletedClaim(karpv1.ConditionTypeRegistered))
			c.cloud = cloud
			c.reader = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tt.fresh).Build()
			if _, err := finalizeOnce(t, c); err != nil {
				t.Fatal(err)
			}
			if cloud.deletes != tt.wantDeletes {
				t.Errorf("%d Deletes, want %d", cloud.deletes, tt.wantDeletes)
			}
			if !released(t, kube) {
				t.Error("NodeClaim not released")
			}
		})
	}
}

// TestFinalizeWaitsForTheNodeAndTheCloud checks that finalize deletes an
// existing Node and waits for it without calling the cloud, and keeps the
// NodeClaim while the cloud fails (control: released once it answers).
func TestFinalizeWaitsForTheNodeAndTheCloud(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: finalizeProviderID}}
	cloud := &countingCloud{}
	c, kube := newTestController(t, time.Now(), deletedClaim(karpv1.ConditionTypeRegistered), node)
	c.cloud = cloud
	res, err := finalizeOnce(t, c)
	if err != nil || res.RequeueAfter != clusterstate.DrainRequeue {
		t.Fatalf("Reconcile = %+v, %v; want a requeue after %s", res, err, clusterstate.DrainRequeue)
	}
	got := &corev1.Node{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "n1"}, got); err != nil {
		t.Fatal(err)
	}
	if got.DeletionTimestamp.IsZero() || cloud.deletes != 0 || released(t, kube) {
		t.Fatalf("with a Node: Node deleting %t, %d Deletes, released %t; want true, 0, false",
			!got.DeletionTimestamp.IsZero(), cloud.deletes, released(t, kube))
	}

	throttled := errors.New("RequestLimitExceeded")
	cloud = &countingCloud{err: throttled}
	c, kube = newTestController(t, time.Now(), deletedClaim())
	c.cloud = cloud
	if _, err := finalizeOnce(t, c); !errors.Is(err, throttled) || released(t, kube) {
		t.Fatalf("cloud error: %v, released %t; want %v, false", err, released(t, kube), throttled)
	}
	cloud.err = nil
	if _, err := finalizeOnce(t, c); err != nil || !released(t, kube) || cloud.deletes != 2 {
		t.Fatalf("retry: %v, released %t after %d Deletes; want nil, true, 2", err, released(t, kube), cloud.deletes)
	}
}
