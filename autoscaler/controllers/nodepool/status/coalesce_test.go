package status

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestNodeClaimEventsCoalesce: a burst of NodeClaim events (creations,
// an update moving a NodeClaim between pools, a deletion) queues nothing
// before the delay and then one request per NodePool; a NodeClaim without
// a pool label queues none.
func TestNodeClaimEventsCoalesce(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clock})
	defer q.ShutDown()
	claim := func(name, pool string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if pool != "" {
			nc.Labels = map[string]string{karpv1.NodePoolLabelKey: pool}
		}
		return nc
	}
	h, ctx := nodePoolAfter(time.Second), context.Background()
	for i := range 100 {
		h.Create(ctx, event.CreateEvent{Object: claim("a-"+string(rune('a'+i%26)), "a")}, q)
	}
	h.Update(ctx, event.UpdateEvent{ObjectOld: claim("m", "a"), ObjectNew: claim("m", "b")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: claim("d", "c")}, q)
	h.Create(ctx, event.CreateEvent{Object: claim("no-pool", "")}, q)
	if n := q.Len(); n != 0 {
		t.Fatalf("%d requests queued before the delay, want 0", n)
	}
	clock.Step(time.Second)
	want := map[string]bool{"a": true, "b": true, "c": true}
	deadline := time.Now().Add(10 * time.Second) // the queue moves waiting items on its own goroutine
	for q.Len() < len(want) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := q.Len(); n != len(want) {
		t.Fatalf("%d requests queued after the delay, want %d (one per NodePool)", n, len(want))
	}
	for range len(want) {
		req, _ := q.Get()
		if !want[req.Name] {
			t.Fatalf("unexpected request %v", req)
		}
		delete(want, req.Name)
		q.Done(req)
	}
}
