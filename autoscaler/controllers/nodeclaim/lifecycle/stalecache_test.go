package lifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/state/launchhealth"
)

// lagging is a fake API server whose reads of NodeClaims and Nodes can be
// made to return an older copy, as an informer cache that has not seen the
// latest write yet does, and which counts every write.
type lagging struct {
	client.Client
	// store is the fake API server itself, past the interceptors.
	store client.WithWatch
	// stale, when set, is what a Get of that NodeClaim returns.
	stale *karpv1.NodeClaim
	// staleNode, when set, is what a List of Nodes returns.
	staleNode *corev1.Node
	// writes counts PATCH requests by "kind" or "kind/subresource".
	writes map[string]int
}

func newLagging(t *testing.T, now time.Time, objs ...client.Object) (*Controller, *lagging) {
	t.Helper()
	l := &lagging{writes: map[string]int{}}
	l.store = fakeAPI(objs...)
	l.Client = interceptor.NewClient(l.store, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if nc, ok := obj.(*karpv1.NodeClaim); ok && l.stale != nil && key.Name == l.stale.Name {
				l.stale.DeepCopyInto(nc)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if nodes, ok := list.(*corev1.NodeList); ok && l.staleNode != nil {
				nodes.Items = []corev1.Node{*l.staleNode.DeepCopy()}
				return nil
			}
			return c.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			l.writes[kindOf(obj)]++
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			l.writes[kindOf(obj)+"/"+sub]++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	health := launchhealth.New(launchhealth.Options{BaseBackoff: time.Minute, MaxBackoff: time.Hour})
	return New(l, nil, record.NewFakeRecorder(100), health, Options{Clock: clocktesting.NewFakePassiveClock(now)}), l
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *karpv1.NodeClaim:
		return "NodeClaim"
	case *corev1.Node:
		return "Node"
	}
	return "other"
}

func (l *lagging) total() int {
	n := 0
	for _, v := range l.writes {
		n += v
	}
	return n
}

// launchedClaim returns a NodeClaim whose instance runs, and its Node,
// registered with the karpenter.sh/unregistered taint and Ready as ready
// says.
func launchedClaim(now time.Time, ready corev1.ConditionStatus) (*karpv1.NodeClaim, *corev1.Node) {
	nc := gpuClaim(now.Add(-time.Minute))
	nc.Status.ProviderID = "aws:///us-east-1a/i-0lagging"
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1"},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID,
			Taints: []corev1.Taint{{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	return nc, node
}

// TestStaleCacheWritesNoPhaseTwice: a reconcile that reads the NodeClaim
// as it was before this controller registered and initialised it (the
// informer cache lags the controller's own writes; a Node event woke it)
// writes nothing and counts no second Node, until cacheLagLimit has
// passed; once the cache has caught up, a reconcile writes nothing either.
func TestStaleCacheWritesNoPhaseTwice(t *testing.T) {
	now := time.Now()
	nc, node := launchedClaim(now, corev1.ConditionTrue)
	c, l := newLagging(t, now, nc, node)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}
	before := nc.DeepCopy()
	created := nodesCreated(t, "gpu")

	if _, err := c.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := &karpv1.NodeClaim{}
	if err := l.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if !got.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		t.Fatalf("fresh reconcile did not initialise the NodeClaim: %+v", got.Status.Conditions)
	}
	if l.writes["NodeClaim/status"] != 2 {
		t.Fatalf("fresh reconcile: %d NodeClaim status patches, want 2 (Registered, Initialized): %v", l.writes["NodeClaim/status"], l.writes)
	}
	first := l.total()

	l.stale = before
	for i := range 3 {
		res, err := c.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > cacheLagLimit {
			t.Fatalf("stale reconcile %d: requeue after %s, want within (0, %s]", i, res.RequeueAfter, cacheLagLimit)
		}
	}
	if n := l.total() - first; n != 0 {
		t.Fatalf("stale reconciles wrote %d times: %v", n, l.writes)
	}
	if n := nodesCreated(t, "gpu") - created; n != 1 {
		t.Fatalf("karpenter_nodes_created_total rose by %v, want 1", n)
	}
	if err := l.store.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if !got.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		t.Fatal("a stale reconcile rolled the NodeClaim's conditions back")
	}

	// Past the limit the cache is believed: a status rolled back by
	// someone else is recorded again.
	c.opts.Clock.(*clocktesting.FakePassiveClock).SetTime(now.Add(cacheLagLimit))
	if _, err := c.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if l.writes["NodeClaim/status"] == 2 {
		t.Fatalf("past cacheLagLimit a NodeClaim that reads unregistered was not recorded again: %v", l.writes)
	}

	// The cache caught up: nothing to write.
	l.stale = nil
	written := l.total()
	if _, err := c.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := l.total() - written; n != 0 {
		t.Fatalf("reconcile of an initialised NodeClaim wrote %d times: %v", n, l.writes)
	}
}

// TestNotInitializedWrittenOnce: while its Node is NotReady, a registered
// NodeClaim is reconciled on every Node update; it records why it is not
// initialised once, not once per update.
func TestNotInitializedWrittenOnce(t *testing.T) {
	now := time.Now()
	nc, node := launchedClaim(now, corev1.ConditionFalse)
	c, l := newLagging(t, now, nc, node)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}
	for range 4 {
		if _, err := c.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	got := &karpv1.NodeClaim{}
	if err := l.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	cond := got.StatusConditions().Get(karpv1.ConditionTypeInitialized)
	if !got.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() || cond == nil || cond.Reason != "NotInitialized" {
		t.Fatalf("want Registered and Initialized=Unknown/NotInitialized, got %+v", got.Status.Conditions)
	}
	if l.writes["NodeClaim/status"] != 1 || l.writes["Node"] != 1 {
		t.Fatalf("4 reconciles of a NodeClaim whose Node is NotReady wrote %v, want 1 Node patch and 1 status patch", l.writes)
	}
}
