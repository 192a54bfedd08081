package static

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// staticPool returns NodePool "static" with replicas (nil: a dynamic
// NodePool) and limits.nodes when limit >= 0.
func staticPool(replicas *int64, limit int64) *karpv1.NodePool {
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "static", UID: "uid-static"},
		Spec: karpv1.NodePoolSpec{
			Replicas: replicas,
			Template: karpv1.NodeClaimTemplate{
				ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"team": "a"}},
				Spec: karpv1.NodeClaimTemplateSpec{
					NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
						{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
					},
				},
			},
		},
	}
	if limit >= 0 {
		np.Spec.Limits = karpv1.Limits{"nodes": *resource.NewQuantity(limit, resource.DecimalSI)}
	}
	return np
}

// claim returns NodeClaim name of NodePool "static", launched (with a
// providerID and Node name) when launched, created ago before t0.
func claim(name string, launched bool, ago time.Duration) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "static"},
		CreationTimestamp: metav1.NewTime(t0.Add(-ago))}}
	if launched {
		nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
		nc.Status.NodeName = "node-" + name
	}
	return nc
}

// pod returns a running pod on node, with mutate applied.
func pod(name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

type fixture struct {
	c    *Controller
	kube client.Client
	clk  *clocktesting.FakeClock
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).Build()
	clk := clocktesting.NewFakeClock(t0)
	return &fixture{c: New(kube, kube, clk), kube: kube, clk: clk}
}

func (f *fixture) reconcile(t *testing.T) reconcile.Result {
	t.Helper()
	res, err := f.c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "static"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// claims returns the names of the NodePool's NodeClaims not being deleted,
// and how many are being deleted.
func (f *fixture) claims(t *testing.T) (live []string, deleting int) {
	t.Helper()
	var list karpv1.NodeClaimList
	if err := f.kube.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for _, nc := range list.Items {
		if nc.DeletionTimestamp.IsZero() {
			live = append(live, nc.Name)
		} else {
			deleting++
		}
	}
	return live, deleting
}

func TestToLaunch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int64
		n        Counts
		limit    *int64
		want     int64
	}{
		{"empty pool", 3, Counts{}, nil, 3},
		{"at replicas", 3, Counts{Active: 3}, nil, 0},
		{"above replicas: scale-in's business", 3, Counts{Active: 5}, nil, 0},
		{"one deleted", 3, Counts{Active: 2, Deleting: 1}, nil, 1},
		{"replacement in flight counts", 3, Counts{Active: 2, PendingDisruption: 1}, nil, 0},
		{"limit caps the launch", 5, Counts{Active: 1}, ptr.To[int64](3), 2},
		{"deleting holds its place in the limit", 3, Counts{Active: 2, Deleting: 1}, ptr.To[int64](3), 0},
		{"limit below active", 3, Counts{Active: 1, Deleting: 4}, ptr.To[int64](2), 0},
		{"zero replicas", 0, Counts{}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToLaunch(tc.replicas, tc.n, tc.limit); got != tc.want {
				t.Errorf("ToLaunch(%d, %+v, %v) = %d; want %d", tc.replicas, tc.n, tc.limit, got, tc.want)
			}
		})
	}
}

// A static NodePool with no NodeClaims gets spec.replicas of them, built
// from its template without pods, and a second pass creates none.
func TestLaunchesReplicasWithoutPods(t *testing.T) {
	f := newFixture(t, staticPool(ptr.To[int64](3), -1))
	if res := f.reconcile(t); res.RequeueAfter != Resync {
		t.Errorf("RequeueAfter = %v; want %v", res.RequeueAfter, Resync)
	}
	live, _ := f.claims(t)
	if len(live) != 3 {
		t.Fatalf("NodeClaims after the first pass: %v; want 3", live)
	}
	f.reconcile(t)
	if again, _ := f.claims(t); len(again) != 3 {
		t.Fatalf("NodeClaims after the second pass: %v; want still 3", again)
	}
	var nc karpv1.NodeClaim
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: live[0]}, &nc); err != nil {
		t.Fatal(err)
	}
	if nc.Labels[karpv1.NodePoolLabelKey] != "static" || nc.Labels["team"] != "a" || nc.Labels["karpenter.k8s.aws/ec2nodeclass"] != "default" {
		t.Errorf("labels = %v; want the NodePool, template and node class labels", nc.Labels)
	}
	if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].Name != "static" || nc.OwnerReferences[0].UID != "uid-static" {
		t.Errorf("ownerReferences = %+v; want the NodePool", nc.OwnerReferences)
	}
	if nc.Annotations[karpv1.NodePoolHashAnnotationKey] == "" {
		t.Errorf("annotations = %v; want the NodePool hash (drift compares it)", nc.Annotations)
	}
	if _, ok := nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]; ok {
		t.Errorf("annotations = %v; a static NodeClaim is not planned and has no min-values-relaxed annotation", nc.Annotations)
	}
	if len(nc.Spec.Resources.Requests) != 0 {
		t.Errorf("requests = %v; want none", nc.Spec.Resources.Requests)
	}
	keys := map[string][]string{}
	for _, r := range nc.Spec.Requirements {
		keys[r.Key] = r.Values
	}
	if _, ok := keys[corev1.LabelInstanceTypeStable]; ok {
		t.Errorf("requirements %v name instance types; the cloud provider picks from the template's", keys)
	}
	for k, want := range map[string]string{corev1.LabelTopologyZone: "us-east-1a", karpv1.NodePoolLabelKey: "static", "team": "a"} {
		if v := keys[k]; len(v) != 1 || v[0] != want {
			t.Errorf("requirement %s = %v; want [%s]", k, v, want)
		}
	}
}

// A deleted NodeClaim is replaced while it terminates, unless
// limits.nodes has no room for it until it is gone.
func TestReplacesDeletedNodeClaim(t *testing.T) {
	deleting := claim("c", true, time.Hour)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	deleting.Finalizers = []string{karpv1.TerminationFinalizer}
	f := newFixture(t, staticPool(ptr.To[int64](3), -1), claim("a", true, time.Hour), claim("b", true, time.Hour), deleting)
	f.reconcile(t)
	if live, n := f.claims(t); len(live) != 3 || n != 1 {
		t.Fatalf("live %v, deleting %d; want 3 live (one new) and 1 deleting", live, n)
	}

	f = newFixture(t, staticPool(ptr.To[int64](3), 3), claim("a", true, time.Hour), claim("b", true, time.Hour), deleting)
	if res := f.reconcile(t); res.RequeueAfter != LimitRequeue {
		t.Errorf("RequeueAfter = %v; want %v while the limit is reached", res.RequeueAfter, LimitRequeue)
	}
	if live, _ := f.claims(t); len(live) != 2 {
		t.Fatalf("live %v; want 2: limits.nodes 3 counts the deleting NodeClaim", live)
	}
}

// A NodeClaim disruption is replacing counts towards replicas: nothing is
// launched for it, and it is not scaled in either.
func TestPendingDisruptionCounts(t *testing.T) {
	replaced := claim("c", true, time.Hour)
	replaced.Annotations = map[string]string{ReplacementsAnnotationKey: "static-r"}
	f := newFixture(t, staticPool(ptr.To[int64](3), -1), claim("a", true, time.Hour), claim("b", true, time.Hour), replaced)
	f.reconcile(t)
	if live, n := f.claims(t); len(live) != 3 || n != 0 {
		t.Fatalf("live %v, deleting %d; want the 3 untouched", live, n)
	}
}

// Scaling in deletes NodeClaims not launched yet first, then empty nodes
// (DaemonSet pods do not count), then the node with fewer pods; a node
// with an active do-not-disrupt pod goes last.
func TestScaleInOrder(t *testing.T) {
	daemon := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
	}
	dnd := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: v}
			p.Status.StartTime = &metav1.Time{Time: t0.Add(-10 * time.Minute)}
		}
	}
	objs := []client.Object{
		claim("unlaunched", false, time.Minute),
		claim("empty", true, time.Hour), pod("ds-empty", "node-empty", daemon),
		claim("one", true, time.Hour), pod("p1", "node-one"),
		claim("two", true, time.Hour), pod("p2", "node-two"), pod("p3", "node-two"),
		claim("held", true, time.Hour), pod("p4", "node-held", dnd("1h")),
		claim("expired", true, time.Hour), pod("p5", "node-expired", dnd("5m")), pod("p6", "node-expired"), pod("p7", "node-expired"),
	}
	for _, tc := range []struct {
		replicas int64
		gone     []string
	}{
		{5, []string{"unlaunched"}},
		{4, []string{"unlaunched", "empty"}},
		{3, []string{"unlaunched", "empty", "one"}},
		{2, []string{"unlaunched", "empty", "one", "two"}},
		// "expired"'s do-not-disrupt ran out after 5 minutes: it goes
		// before "held", whose hour is not over.
		{1, []string{"unlaunched", "empty", "one", "two", "expired"}},
		{0, []string{"unlaunched", "empty", "one", "two", "expired", "held"}},
	} {
		t.Run(fmt.Sprint(tc.replicas), func(t *testing.T) {
			f := newFixture(t, append([]client.Object{staticPool(ptr.To(tc.replicas), -1)}, objs...)...)
			f.reconcile(t)
			live, _ := f.claims(t)
			left := map[string]bool{}
			for _, n := range live {
				left[n] = true
			}
			for _, g := range tc.gone {
				if left[g] {
					t.Errorf("replicas %d: %s still there; want it deleted (left: %v)", tc.replicas, g, live)
				}
			}
			if int64(len(live)) != tc.replicas {
				t.Errorf("replicas %d: left %v", tc.replicas, live)
			}
		})
	}
}

// A dynamic NodePool, one being deleted and one whose EC2NodeClass is not
// ready get no NodeClaim.
func TestLeavesOtherNodePoolsAlone(t *testing.T) {
	dynamic := staticPool(nil, -1)
	deleted := staticPool(ptr.To[int64](2), -1)
	deleted.DeletionTimestamp = &metav1.Time{Time: t0}
	deleted.Finalizers = []string{"test/keep"}
	notReady := staticPool(ptr.To[int64](2), -1)
	notReady.StatusConditions().SetFalse(karpv1.ConditionTypeNodeClassReady, "NodeClassNotFound", "EC2NodeClass default not found")
	for name, np := range map[string]*karpv1.NodePool{"dynamic": dynamic, "deleted": deleted, "NodeClassReady=False": notReady} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, np)
			f.reconcile(t)
			if live, _ := f.claims(t); len(live) != 0 {
				t.Errorf("NodeClaims %v; want none", live)
			}
		})
	}
}

// Raising replicas launches the difference; lowering it to the count of
// launched NodeClaims deletes only the unlaunched ones.
func TestReplicasChange(t *testing.T) {
	np := staticPool(ptr.To[int64](1), -1)
	f := newFixture(t, np, claim("a", true, time.Hour))
	np.Spec.Replicas = ptr.To[int64](4)
	if err := f.kube.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	if live, _ := f.claims(t); len(live) != 4 {
		t.Fatalf("live %v; want 4 after replicas 1 → 4", live)
	}
	np.Spec.Replicas = ptr.To[int64](1)
	if err := f.kube.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	if live, _ := f.claims(t); len(live) != 1 || live[0] != "a" {
		t.Fatalf("live %v; want [a]: the launched NodeClaim stays, the three not launched go", live)
	}
}

func TestEqualReplicas(t *testing.T) {
	for _, tc := range []struct {
		a, b *int64
		want bool
	}{
		{nil, nil, true}, {ptr.To[int64](1), nil, false}, {nil, ptr.To[int64](0), false},
		{ptr.To[int64](2), ptr.To[int64](2), true}, {ptr.To[int64](2), ptr.To[int64](3), false},
	} {
		if got := equalReplicas(tc.a, tc.b); got != tc.want {
			t.Errorf("equalReplicas(%v, %v) = %v; want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// An update wakes the controller when replicas change or NodeClassReady
// changes status, not for other changes (labels, status.nodes).
func TestNodePoolChanged(t *testing.T) {
	base := staticPool(ptr.To[int64](3), -1)
	base.StatusConditions().SetFalse(karpv1.ConditionTypeNodeClassReady, "NodeClassNotReady", "not ready")
	scaled := base.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int64](1)
	ready := base.DeepCopy()
	ready.StatusConditions().SetTrue(karpv1.ConditionTypeNodeClassReady)
	other := base.DeepCopy()
	other.Labels = map[string]string{"x": "y"}
	other.Status.Nodes = ptr.To[int64](2)
	for name, tc := range map[string]struct {
		n    *karpv1.NodePool
		want bool
	}{"replicas": {scaled, true}, "NodeClassReady": {ready, true}, "other": {other, false}} {
		if got := nodePoolChanged(base, tc.n); got != tc.want {
			t.Errorf("%s: nodePoolChanged = %v; want %v", name, got, tc.want)
		}
	}
}
