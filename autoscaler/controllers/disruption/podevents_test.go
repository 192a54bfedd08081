package disruption

import (
	"context"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// podEventsFixture is a PodEvents on a fake API server holding one Node
// and its NodeClaim, counting the NodeClaim status writes.
type podEventsFixture struct {
	p       *PodEvents
	kube    client.Client
	clk     *clocktesting.FakeClock
	patches int
}

func newPodEventsFixture(t *testing.T, start time.Time) *podEventsFixture {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc1", Finalizers: []string{karpv1.TerminationFinalizer}},
		Status: karpv1.NodeClaimStatus{ProviderID: node.Spec.ProviderID}}
	f := &podEventsFixture{clk: clocktesting.NewFakeClock(start)}
	f.kube = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(node, nc).
		WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&karpv1.NodeClaim{}, clusterstate.NodeClaimProviderIDField, func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
		}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			f.patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	f.p = NewPodEvents(f.kube, f.clk)
	return f
}

// event records a pod event on n1 now and reconciles it.
func (f *podEventsFixture) event(t *testing.T) reconcile.Result {
	t.Helper()
	f.p.observe("n1")
	return f.reconcile(t)
}

func (f *podEventsFixture) reconcile(t *testing.T) reconcile.Result {
	t.Helper()
	res, err := f.p.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *podEventsFixture) stored(t *testing.T) time.Time {
	t.Helper()
	var nc karpv1.NodeClaim
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "nc1"}, &nc); err != nil {
		t.Fatal(err)
	}
	return nc.Status.LastPodEventTime.Time
}

// Pod events inside Karpenter's 10 s dedupe window are written once, at the
// window's end, with the newest event's time (rounded up to the second the
// API server keeps), never the time of the write; and the newest event is
// readable (Newest) before it is written.
func TestPodEventsWritesNewestEventOncePerWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 300e6, time.UTC)
	f := newPodEventsFixture(t, t0)
	if res := f.event(t); res.RequeueAfter != 0 || f.patches != 1 {
		t.Fatalf("first event: requeue %s, %d writes; want none and 1", res.RequeueAfter, f.patches)
	}
	if got, want := f.stored(t), t0.Truncate(time.Second).Add(time.Second); !got.Equal(want) {
		t.Fatalf("lastPodEventTime = %s, want %s (the event, rounded up)", got, want)
	}
	// Two more events 2 s and 5 s later: folded, nothing written yet.
	f.clk.Step(2 * time.Second)
	f.event(t)
	f.clk.Step(3 * time.Second)
	res := f.event(t)
	last := f.clk.Now()
	if f.patches != 1 {
		t.Fatalf("events inside the window wrote %d times, want 1 write in all", f.patches)
	}
	if want := t0.Truncate(time.Second).Add(time.Second + PodEventDedupe).Sub(last); res.RequeueAfter != want {
		t.Fatalf("requeue after %s, want %s (the window's end)", res.RequeueAfter, want)
	}
	if got := f.p.Newest("n1"); !got.Equal(last) {
		t.Fatalf("Newest = %s, want the last event %s", got, last)
	}
	// At the window's end, the write carries the last event's time, which
	// is 5.7 s before the write.
	f.clk.Step(res.RequeueAfter)
	f.reconcile(t)
	if f.patches != 2 {
		t.Fatalf("%d writes at the window's end, want 2 in all", f.patches)
	}
	if got, want := f.stored(t), last.Truncate(time.Second).Add(time.Second); !got.Equal(want) {
		t.Fatalf("lastPodEventTime = %s, want %s (the newest event, not the write's %s)", got, want, f.clk.Now())
	}
	// No new event: nothing more to write.
	f.clk.Step(time.Minute)
	if res := f.reconcile(t); res.RequeueAfter != 0 || f.patches != 2 {
		t.Fatalf("no new event: requeue %s, %d writes; want none and 2", res.RequeueAfter, f.patches)
	}
}

// A NodeClaim being deleted is never a consolidation candidate again: its
// pod events (its drain's evictions) are not written, and forgotten.
func TestPodEventsSkipsDeletingNodeClaim(t *testing.T) {
	f := newPodEventsFixture(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc1"}}
	if err := f.kube.Delete(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	f.event(t)
	if f.patches != 0 || !f.stored(t).IsZero() {
		t.Fatalf("deleting NodeClaim: %d writes, lastPodEventTime %s; want none", f.patches, f.stored(t))
	}
	if got := f.p.Newest("n1"); !got.IsZero() {
		t.Fatalf("Newest = %s after the NodeClaim began deleting, want zero (forgotten)", got)
	}
}

// consolidateAfter counts from the newest pod event seen, even before it is
// written to lastPodEventTime.
func TestConsolidatableAtCountsFromUnwrittenEvent(t *testing.T) {
	init := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nc := &karpv1.NodeClaim{}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	cond := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized)
	cond.LastTransitionTime = metav1.NewTime(init)
	nc.Status.Conditions = []status.Condition{*cond}
	nc.Status.LastPodEventTime = metav1.NewTime(init.Add(time.Minute))
	pool := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{
		ConsolidateAfter: karpv1.MustParseNillableDuration("30s")}}}
	if got, want := consolidatableAt(nc, pool, time.Time{}), init.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("no unwritten event: consolidatableAt = %s, want %s", got, want)
	}
	unwritten := init.Add(67 * time.Second)
	if got, want := consolidatableAt(nc, pool, unwritten), unwritten.Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("unwritten event at %s: consolidatableAt = %s, want %s", unwritten, got, want)
	}
}

// A Node gone takes what PodEvents remembers of it along.
func TestPodEventsForgetsGoneNode(t *testing.T) {
	f := newPodEventsFixture(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f.event(t)
	if f.p.Newest("n1").IsZero() {
		t.Fatal("Newest is zero right after a pod event")
	}
	if err := f.kube.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	if got := f.p.Newest("n1"); !got.IsZero() {
		t.Fatalf("Newest = %s after the Node was deleted, want zero (forgotten)", got)
	}
}
