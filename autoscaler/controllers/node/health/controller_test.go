package health

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// policies are three of the AWS provider's (its package is not imported
// here: the controller is cloud-neutral).
var policies = []cloudprovider.RepairPolicy{
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute},
	{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
}

// cond is a condition that transitioned ago before t0.
func cond(t corev1.NodeConditionType, s corev1.ConditionStatus, ago time.Duration) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(t0.Add(-ago))}
}

var healthy = []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue, time.Hour)}

// nodeAndClaim returns Node name of pool (no label when pool is "") and
// its NodeClaim, with conditions.
func nodeAndClaim(name, pool string, conds ...corev1.NodeCondition) (*corev1.Node, *karpv1.NodeClaim) {
	pid := "aws:///us-east-1a/i-" + name
	labels := map[string]string{karpv1.CapacityTypeLabelKey: "on-demand"}
	if pool != "" {
		labels[karpv1.NodePoolLabelKey] = pool
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Conditions: conds}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, Labels: labels, Finalizers: []string{karpv1.TerminationFinalizer}},
		Status: karpv1.NodeClaimStatus{ProviderID: pid, NodeName: name, ImageID: "ami-0123"}}
	return n, nc
}

type fixture struct {
	c    *Controller
	kube client.Client
	clk  *clocktesting.FakeClock
	rec  *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&karpv1.NodeClaim{}, clusterstate.NodeClaimProviderIDField, func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
		}).Build()
	clk := clocktesting.NewFakeClock(t0)
	rec := record.NewFakeRecorder(100)
	return &fixture{c: New(kube, policies, rec, clk), kube: kube, clk: clk, rec: rec}
}

func (f *fixture) reconcile(t *testing.T, node string) reconcile.Result {
	t.Helper()
	res, err := f.c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: node}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// claim returns the NodeClaim of node and whether it is being deleted.
func (f *fixture) claim(t *testing.T, node string) (*karpv1.NodeClaim, bool) {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "nc-" + node}, nc); err != nil {
		t.Fatal(err)
	}
	return nc, !nc.DeletionTimestamp.IsZero()
}

func (f *fixture) events() []string {
	var out []string
	for len(f.rec.Events) > 0 {
		out = append(out, <-f.rec.Events)
	}
	return out
}

// objects flattens Nodes and NodeClaims for the fake client.
func objects(pairs ...any) []client.Object {
	var out []client.Object
	for _, p := range pairs {
		out = append(out, p.(client.Object))
	}
	return out
}

// TestRepairAfterToleration: a Node Ready=False for 29 minutes is left
// and looked at again when its 30 minutes run out; then its NodeClaim is
// annotated with the repair time and deleted, and the repair is counted
// with reason "unhealthy" and condition "ready". The control is the same
// Node Ready: nothing happens, no requeue.
func TestRepairAfterToleration(t *testing.T) {
	n, nc := nodeAndClaim("a", "pool-a", cond(corev1.NodeReady, corev1.ConditionFalse, 29*time.Minute))
	hn, hnc := nodeAndClaim("b", "pool-a", healthy...)
	f := newFixture(t, objects(n, nc, hn, hnc)...)
	before := testutil.ToFloat64(karpentermetrics.NodeClaimsUnhealthyDisruptedTotal.WithLabelValues("ready", "pool-a", "on-demand", "ami-0123"))

	if res := f.reconcile(t, "a"); res.RequeueAfter != time.Minute {
		t.Fatalf("29 minutes in: %+v, want a requeue after 1m", res)
	}
	if _, deleting := f.claim(t, "a"); deleting {
		t.Fatal("repaired before its toleration ran out")
	}
	f.clk.Step(time.Minute)
	if res := f.reconcile(t, "a"); res != (reconcile.Result{}) {
		t.Fatalf("30 minutes in: %+v, want done", res)
	}
	got, deleting := f.claim(t, "a")
	if !deleting {
		t.Fatal("the NodeClaim was not deleted at 30 minutes")
	}
	if stamp := got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; stamp != f.clk.Now().Format(time.RFC3339) {
		t.Fatalf("termination timestamp %q, want the repair time %s", stamp, f.clk.Now().Format(time.RFC3339))
	}
	after := testutil.ToFloat64(karpentermetrics.NodeClaimsUnhealthyDisruptedTotal.WithLabelValues("ready", "pool-a", "on-demand", "ami-0123"))
	if after != before+1 {
		t.Fatalf("karpenter_nodeclaims_unhealthy_disrupted_total{condition=ready} %v → %v, want +1", before, after)
	}
	if res := f.reconcile(t, "b"); res != (reconcile.Result{}) {
		t.Fatalf("healthy Node: %+v, want nothing", res)
	}
	if _, deleting := f.claim(t, "b"); deleting {
		t.Fatal("a healthy Node was repaired")
	}
}

// TestShortestTolerationWins: a Node with Ready=Unknown (30m) and
// AcceleratedHardwareReady=False (10m) since the same time is repaired at
// 10 minutes, counted under accelerated_hardware_ready.
func TestShortestTolerationWins(t *testing.T) {
	n, nc := nodeAndClaim("gpu", "gpus", cond(corev1.NodeReady, corev1.ConditionUnknown, 5*time.Minute),
		cond("AcceleratedHardwareReady", corev1.ConditionFalse, 5*time.Minute))
	f := newFixture(t, n, nc)
	if res := f.reconcile(t, "gpu"); res.RequeueAfter != 5*time.Minute {
		t.Fatalf("%+v, want a requeue after 5m (10m toleration, 5m in)", res)
	}
	f.clk.Step(5 * time.Minute)
	f.reconcile(t, "gpu")
	if _, deleting := f.claim(t, "gpu"); !deleting {
		t.Fatal("not repaired at 10 minutes")
	}
	if v := testutil.ToFloat64(karpentermetrics.NodeClaimsUnhealthyDisruptedTotal.WithLabelValues("accelerated_hardware_ready", "gpus", "on-demand", "ami-0123")); v < 1 {
		t.Fatal("not counted under condition accelerated_hardware_ready")
	}
}

// TestUnhealthyCap: with n Nodes in a NodePool of which u are unhealthy
// (past their toleration), repair goes on while u <= ceil(20% of n) and
// stops otherwise, with a Warning NodeRepairBlocked event on the Node and
// a requeue after 5 minutes. A Node unhealthy for less than its
// toleration counts as unhealthy too. A NodeClaim of no NodePool is
// measured against every Node of the cluster.
func TestUnhealthyCap(t *testing.T) {
	for _, tt := range []struct {
		nodes, unhealthy int
		pool             string
		wantRepair       bool
	}{
		{1, 1, "p", true},   // ceil(0.2) = 1
		{2, 2, "p", false},  // ceil(0.4) = 1
		{3, 1, "p", true},   // 33% but ceil(0.6) = 1
		{10, 2, "p", true},  // ceil(2) = 2
		{10, 3, "p", false}, // 3 > 2
		{5, 2, "", false},   // the cluster's 5 Nodes: ceil(1) = 1
		{6, 2, "", true},    // ceil(1.2) = 2
	} {
		t.Run(fmt.Sprintf("%d of %d in %q", tt.unhealthy, tt.nodes, tt.pool), func(t *testing.T) {
			var objs []client.Object
			for i := range tt.nodes {
				conds := healthy
				switch {
				case i == 0:
					conds = []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, time.Hour)}
				case i < tt.unhealthy:
					// unhealthy for a minute only: counts against the cap
					conds = []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown, time.Minute)}
				}
				n, nc := nodeAndClaim(fmt.Sprintf("n%d", i), tt.pool, conds...)
				objs = append(objs, n, nc)
			}
			// a Node of another pool, unhealthy: never counted in "p"
			other, otherNC := nodeAndClaim("other", "q", cond(corev1.NodeReady, corev1.ConditionFalse, time.Hour))
			if tt.pool == "p" {
				objs = append(objs, other, otherNC)
			}
			f := newFixture(t, objs...)
			res := f.reconcile(t, "n0")
			_, deleting := f.claim(t, "n0")
			if deleting != tt.wantRepair {
				t.Fatalf("repaired %t, want %t", deleting, tt.wantRepair)
			}
			ev := f.events()
			if tt.wantRepair {
				if len(ev) != 0 || res != (reconcile.Result{}) {
					t.Fatalf("events %q, result %+v; want none", ev, res)
				}
				return
			}
			where := "nodepool"
			if tt.pool == "" {
				where = "cluster"
			}
			want := "Warning NodeRepairBlocked more than 20% nodes are unhealthy in the " + where
			if len(ev) != 1 || ev[0] != want || res.RequeueAfter != BlockedRequeue {
				t.Fatalf("events %q, result %+v; want [%q] and a requeue after %s", ev, res, want, BlockedRequeue)
			}
		})
	}
}

// TestRecordedTimestampAndDeletingClaim: an earlier termination timestamp
// already on the NodeClaim stays; a NodeClaim already being deleted (a
// consolidation's drain, with a later deadline) gets the repair time, so
// its drain stops waiting, and is not counted as a repair.
func TestRecordedTimestampAndDeletingClaim(t *testing.T) {
	earlier := t0.Add(-time.Minute).Format(time.RFC3339)
	n1, nc1 := nodeAndClaim("early", "p", cond(corev1.NodeReady, corev1.ConditionFalse, time.Hour))
	nc1.Annotations = map[string]string{karpv1.NodeClaimTerminationTimestampAnnotationKey: earlier}
	f := newFixture(t, n1, nc1)
	f.reconcile(t, "early")
	got, deleting := f.claim(t, "early")
	if !deleting || got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] != earlier {
		t.Fatalf("deleting %t, timestamp %q; want deleted, %q kept", deleting, got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey], earlier)
	}

	n2, nc2 := nodeAndClaim("draining", "p2", cond(corev1.NodeReady, corev1.ConditionFalse, time.Hour))
	nc2.Annotations = map[string]string{karpv1.NodeClaimTerminationTimestampAnnotationKey: t0.Add(time.Hour).Format(time.RFC3339)}
	f = newFixture(t, n2, nc2)
	if err := f.kube.Delete(context.Background(), nc2); err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(karpentermetrics.NodeClaimsUnhealthyDisruptedTotal.WithLabelValues("ready", "p2", "on-demand", "ami-0123"))
	f.reconcile(t, "draining")
	got, _ = f.claim(t, "draining")
	if stamp := got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; stamp != t0.Format(time.RFC3339) {
		t.Fatalf("timestamp %q, want the repair time %s", stamp, t0.Format(time.RFC3339))
	}
	if after := testutil.ToFloat64(karpentermetrics.NodeClaimsUnhealthyDisruptedTotal.WithLabelValues("ready", "p2", "on-demand", "ami-0123")); after != before {
		t.Fatal("a NodeClaim already being deleted was counted as a repair")
	}
}

// TestUnmanagedNode: a Node with no NodeClaim (not karpx's) is left alone.
func TestUnmanagedNode(t *testing.T) {
	n, _ := nodeAndClaim("self-managed", "", cond(corev1.NodeReady, corev1.ConditionFalse, time.Hour))
	f := newFixture(t, n)
	if res := f.reconcile(t, "self-managed"); res != (reconcile.Result{}) {
		t.Fatalf("%+v, want nothing", res)
	}
}

// TestConditionsChanged: the predicate wakes on a condition's status or
// transition time and on a condition added, not on a heartbeat.
func TestConditionsChanged(t *testing.T) {
	old := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue, time.Hour)}}}
	beat := old.DeepCopy()
	beat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0)
	flip := old.DeepCopy()
	flip.Status.Conditions[0].Status = corev1.ConditionFalse
	moved := old.DeepCopy()
	moved.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0)
	added := old.DeepCopy()
	added.Status.Conditions = append(added.Status.Conditions, cond("KernelReady", corev1.ConditionFalse, 0))
	for name, tt := range map[string]struct {
		cur  *corev1.Node
		want bool
	}{"heartbeat": {beat, false}, "status": {flip, true}, "transition": {moved, true}, "added": {added, true}} {
		if got := conditionsChanged(old, tt.cur); got != tt.want {
			t.Errorf("%s: %t, want %t", name, got, tt.want)
		}
	}
}
