package termination

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

const testProviderID = "aws:///us-east-1a/i-0123456789abcdef0"

// countingCloud counts Delete calls and answers them with err. Every other
// method panics (the embedded interface is nil): termination must make no
// Get after Delete.
type countingCloud struct {
	cloudprovider.CloudProvider
	err     error
	deletes int
}

func (c *countingCloud) Delete(context.Context, *karpv1.NodeClaim) error {
	c.deletes++
	return c.err
}

// deletingNode is a Node being deleted that still carries the termination
// finalizer, with the providerID of testProviderID.
func deletingNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Finalizers: []string{karpv1.TerminationFinalizer},
		DeletionTimestamp: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		Spec: corev1.NodeSpec{ProviderID: testProviderID}}
}

// registeredClaim is the NodeClaim of deletingNode, itself being deleted
// (mutate may change it).
func registeredClaim(mutate ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Finalizers: []string{karpv1.TerminationFinalizer},
		Labels:            map[string]string{karpv1.NodePoolLabelKey: "default"},
		DeletionTimestamp: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		Status: karpv1.NodeClaimStatus{ProviderID: testProviderID, NodeName: "n1"}}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
	for _, m := range mutate {
		m(nc)
	}
	return nc
}

func newNodeController(t *testing.T, cloud cloudprovider.CloudProvider, objs ...client.Object) (*NodeController, client.Client) {
	t.Helper()
	return newNodeControllerWith(t, cloud, interceptor.Funcs{}, objs...)
}

// newNodeControllerWith is newNodeController whose client calls funcs
// (interceptor.Funcs) first.
func newNodeControllerWith(t *testing.T, cloud cloudprovider.CloudProvider, funcs interceptor.Funcs, objs ...client.Object) (*NodeController, client.Client) {
	t.Helper()
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(funcs).
		WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&karpv1.NodeClaim{}, clusterstate.NodeClaimProviderIDField, func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
		}).
		WithIndex(&storagev1.VolumeAttachment{}, VolumeAttachmentNodeNameField, func(o client.Object) []string {
			return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
		}).Build()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
	return NewNodeController(kube, kube, cloud, record.NewFakeRecorder(100), clk), kube
}

func reconcileNode(t *testing.T, c *NodeController) (reconcile.Result, error) {
	t.Helper()
	return c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "n1"}})
}

// nodeReleased reports whether the Node is gone (its finalizer removed).
func nodeReleased(t *testing.T, kube client.Client) bool {
	t.Helper()
	err := kube.Get(context.Background(), client.ObjectKey{Name: "n1"}, &corev1.Node{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

func claimTerminating(t *testing.T, kube client.Client) bool {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-abc"}, nc); err != nil {
		t.Fatal(err)
	}
	return nc.StatusConditions().Get(karpv1.ConditionTypeInstanceTerminating).IsTrue()
}

// TestReconcileTerminatesOnceAndRecordsIt checks the last steps of a
// drained Node: one Delete, InstanceTerminating=True on its NodeClaim,
// the Node released. Its control is the NodeClaim that already has the
// condition (a reconcile that follows one whose Node patch failed): no
// Delete at all, the Node released.
func TestReconcileTerminatesOnceAndRecordsIt(t *testing.T) {
	for _, tt := range []struct {
		name        string
		claim       *karpv1.NodeClaim
		wantDeletes int
	}{
		{"not yet terminating", registeredClaim(), 1},
		{"already terminating (control)", registeredClaim(func(nc *karpv1.NodeClaim) {
			nc.StatusConditions().SetTrue(karpv1.ConditionTypeInstanceTerminating)
		}), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := &countingCloud{}
			c, kube := newNodeController(t, cloud, deletingNode(), tt.claim)
			res, err := reconcileNode(t, c)
			if err != nil || res.RequeueAfter != 0 {
				t.Fatalf("Reconcile = %+v, %v; want done", res, err)
			}
			if cloud.deletes != tt.wantDeletes {
				t.Errorf("%d Deletes, want %d", cloud.deletes, tt.wantDeletes)
			}
			if !claimTerminating(t, kube) {
				t.Error("NodeClaim lacks InstanceTerminating=True")
			}
			if !nodeReleased(t, kube) {
				t.Error("Node not released")
			}
		})
	}
}

// TestReconcileKeepsTheNodeUntilTheCloudConfirms checks that a cloud
// error keeps the Node's finalizer and records no InstanceTerminating, and that a Node
// whose NodeClaim is gone is still terminated through its providerID
// (control: the same Node released after one Delete).
func TestReconcileKeepsTheNodeUntilTheCloudConfirms(t *testing.T) {
	throttled := errors.New("RequestLimitExceeded")
	cloud := &countingCloud{err: throttled}
	c, kube := newNodeController(t, cloud, deletingNode(), registeredClaim())
	if _, err := reconcileNode(t, c); !errors.Is(err, throttled) {
		t.Fatalf("Reconcile error %v, want %v", err, throttled)
	}
	if nodeReleased(t, kube) || claimTerminating(t, kube) || cloud.deletes != 1 {
		t.Fatalf("after a cloud error: released %t, terminating %t, %d Deletes; want kept, false, 1",
			nodeReleased(t, kube), claimTerminating(t, kube), cloud.deletes)
	}
	cloud.err = nil
	if _, err := reconcileNode(t, c); err != nil {
		t.Fatal(err)
	}
	if !nodeReleased(t, kube) || !claimTerminating(t, kube) || cloud.deletes != 2 {
		t.Fatalf("after the retry: released %t, terminating %t, %d Deletes; want true, true, 2",
			nodeReleased(t, kube), claimTerminating(t, kube), cloud.deletes)
	}

	orphan := &countingCloud{}
	c, kube = newNodeController(t, orphan, deletingNode())
	if _, err := reconcileNode(t, c); err != nil {
		t.Fatal(err)
	}
	if !nodeReleased(t, kube) || orphan.deletes != 1 {
		t.Fatalf("Node without NodeClaim: released %t after %d Deletes, want true after 1", nodeReleased(t, kube), orphan.deletes)
	}
}

// TestReconcileDrainsBeforeTerminating checks that no instance is
// terminated while a pod still needs to leave: the pod is evicted, the
// Node kept, the cloud not called; once the pod is gone (control) the
// instance is terminated.
func TestReconcileDrainsBeforeTerminating(t *testing.T) {
	cloud := &countingCloud{}
	c, kube := newNodeController(t, cloud, deletingNode(), registeredClaim(), pod("web"))
	res, err := reconcileNode(t, c)
	if err != nil || res.RequeueAfter != clusterstate.DrainRequeue {
		t.Fatalf("Reconcile = %+v, %v; want a requeue after %s", res, err, clusterstate.DrainRequeue)
	}
	if cloud.deletes != 0 || nodeReleased(t, kube) {
		t.Fatalf("while draining: %d Deletes, released %t; want 0, false", cloud.deletes, nodeReleased(t, kube))
	}
	if remaining(t, kube)["web"] {
		t.Fatal("pod web not evicted")
	}
	if cond := claimCondition(t, kube, karpv1.ConditionTypeDrained); cond == nil || !cond.IsUnknown() || cond.Reason != "Draining" {
		t.Fatalf("while draining: Drained %+v; want Unknown, reason Draining (Karpenter's)", cond)
	}
	if _, err := reconcileNode(t, c); err != nil {
		t.Fatal(err)
	}
	if cloud.deletes != 1 || !nodeReleased(t, kube) {
		t.Fatalf("once drained: %d Deletes, released %t; want 1, true", cloud.deletes, nodeReleased(t, kube))
	}
	if cond := claimCondition(t, kube, karpv1.ConditionTypeDrained); cond == nil || !cond.IsTrue() {
		t.Fatalf("once drained: Drained %+v; want True", cond)
	}
}

// TestReconcileWritesTheConditionsOncePerReconcile: the NodeClaim's
// termination conditions are written in one status patch per reconcile,
// as Karpenter's termination controller writes them. An empty Node is
// drained, its volumes found detached and its instance terminated in one
// reconcile: one write with Drained, VolumesDetached and
// InstanceTerminating all True (four writes before: Drained Unknown, then
// each condition on its own). Its control is a Node with a pod to evict:
// the first reconcile writes Drained=Unknown (reason Draining) alone, the
// second the other three.
func TestReconcileWritesTheConditionsOncePerReconcile(t *testing.T) {
	for _, tt := range []struct {
		name   string
		pods   []client.Object
		writes []int // status writes after each reconcile, cumulated
	}{
		{"empty Node", nil, []int{1}},
		{"a pod to evict (control)", []client.Object{pod("web")}, []int{1, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			writes := 0
			funcs := interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if _, ok := o.(*karpv1.NodeClaim); ok && sub == "status" {
					writes++
				}
				return c.SubResource(sub).Patch(ctx, o, p, opts...)
			}}
			cloud := &countingCloud{}
			c, kube := newNodeControllerWith(t, cloud, funcs, append([]client.Object{deletingNode(), registeredClaim()}, tt.pods...)...)
			for i, want := range tt.writes {
				if _, err := reconcileNode(t, c); err != nil {
					t.Fatal(err)
				}
				if writes != want {
					t.Fatalf("after reconcile %d: %d status writes of the NodeClaim, want %d", i+1, writes, want)
				}
			}
			for _, typ := range []string{karpv1.ConditionTypeDrained, karpv1.ConditionTypeVolumesDetached, karpv1.ConditionTypeInstanceTerminating} {
				if cond := claimCondition(t, kube, typ); !cond.IsTrue() {
					t.Errorf("%s = %+v, want True", typ, cond)
				}
			}
			if cloud.deletes != 1 || !nodeReleased(t, kube) {
				t.Errorf("%d Deletes, released %t; want 1, true", cloud.deletes, nodeReleased(t, kube))
			}
		})
	}
}

// TestReconcileWritesPastAStaleCache: the cache's copy of the NodeClaim
// lacks a write made since, so the conditions' write under its
// resourceVersion conflicts. Termination reads the NodeClaim afresh and
// writes its conditions onto that copy: InstanceTerminating is recorded,
// the other write kept, the Node released, and EC2 asked once. Returning
// the conflict instead left the termination unrecorded, and the next
// reconcile asked EC2 again. When the write missed was this controller's
// own Drained=True (the reconcile before), karpenter_nodes_drained_total
// does not count the Node again. The control is the same Node read from a
// cache that is up to date.
func TestReconcileWritesPastAStaleCache(t *testing.T) {
	for _, tt := range []struct {
		name        string
		since       func(*karpv1.NodeClaim) // written after the cache's copy; nil: none
		wantKept    string                  // a condition of that write that must stay True
		wantDrained float64                 // karpenter_nodes_drained_total's increase
	}{
		{"cache up to date (control)", nil, "", 1},
		{"another writer's DisruptionReason since", func(nc *karpv1.NodeClaim) {
			nc.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDisruptionReason, "Empty", "Empty")
		}, karpv1.ConditionTypeDisruptionReason, 1},
		{"its own Drained=True since", func(nc *karpv1.NodeClaim) {
			nc.StatusConditions().SetTrue(karpv1.ConditionTypeDrained)
		}, karpv1.ConditionTypeDrained, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := &countingCloud{}
			sc := newStaleCache(t, deletingNode(), registeredClaim())
			api, kube := sc.api, sc.kube
			ctx := context.Background()
			if tt.since != nil {
				current := sc.cached.DeepCopy()
				tt.since(current)
				if err := api.Status().Update(ctx, current); err != nil {
					t.Fatal(err)
				}
			}
			drained := karpentermetrics.NodesDrainedTotal.WithLabelValues("")
			before := testutil.ToFloat64(drained)
			c := NewNodeController(kube, api, cloud, record.NewFakeRecorder(100), clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)))
			if _, err := reconcileNode(t, c); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.since != nil]; sc.conflicts != want {
				t.Errorf("%d conflicts, want %d", sc.conflicts, want)
			}
			if cloud.deletes != 1 || !nodeReleased(t, api) || !claimTerminating(t, api) {
				t.Errorf("%d Deletes, released %t, InstanceTerminating %t; want 1, true, true", cloud.deletes, nodeReleased(t, api), claimTerminating(t, api))
			}
			if tt.wantKept != "" && !claimCondition(t, api, tt.wantKept).IsTrue() {
				t.Errorf("the write made since the cache's copy was lost: %s %+v", tt.wantKept, claimCondition(t, api, tt.wantKept))
			}
			if got := testutil.ToFloat64(drained) - before; got != tt.wantDrained {
				t.Errorf("karpenter_nodes_drained_total rose by %v, want %v", got, tt.wantDrained)
			}
		})
	}
}

// staleCache is a fake API server (api) and a client over it (kube) whose
// NodeClaim list, the cache's, returns cached (default-abc as it was when
// newStaleCache built it) whatever the server holds since; conflicts
// counts kube's status writes refused with 409.
type staleCache struct {
	api       client.WithWatch
	kube      client.Client
	cached    karpv1.NodeClaim
	conflicts int
}

// newStaleCache serves objs, which must include default-abc.
func newStaleCache(t *testing.T, objs ...client.Object) *staleCache {
	t.Helper()
	sc := &staleCache{api: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&storagev1.VolumeAttachment{}, VolumeAttachmentNodeNameField, func(o client.Object) []string {
			return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
		}).Build()}
	if err := sc.api.Get(context.Background(), client.ObjectKey{Name: "default-abc"}, &sc.cached); err != nil {
		t.Fatal(err)
	}
	sc.kube = interceptor.NewClient(sc.api, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if l, ok := list.(*karpv1.NodeClaimList); ok {
				l.Items = []karpv1.NodeClaim{*sc.cached.DeepCopy()}
				return nil
			}
			return c.List(ctx, list, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			err := c.SubResource(sub).Patch(ctx, o, p, opts...)
			if apierrors.IsConflict(err) {
				sc.conflicts++
			}
			return err
		},
	})
	return sc
}

func claimCondition(t *testing.T, kube client.Client, typ string) *status.Condition {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-abc"}, nc); err != nil {
		t.Fatal(err)
	}
	return nc.StatusConditions().Get(typ)
}

// TestReconcileWarnsOfTheTerminationDeadline: a NodeClaim with
// terminationGracePeriod gets Karpenter's Warning
// TerminationGracePeriodExpiring, "All pods will be deleted by <RFC 3339
// deadline>", on its Node and itself, once.
func TestReconcileWarnsOfTheTerminationDeadline(t *testing.T) {
	claim := registeredClaim(func(nc *karpv1.NodeClaim) { nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour} })
	c, _ := newNodeController(t, &countingCloud{}, deletingNode(), claim, pod("web"))
	for range 2 {
		if _, err := reconcileNode(t, c); err != nil {
			t.Fatal(err)
		}
	}
	rec := c.recorder.(*record.FakeRecorder)
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	want := "Warning TerminationGracePeriodExpiring All pods will be deleted by 2026-01-01T01:00:00Z"
	n := 0
	for _, e := range got {
		if e == want {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("events %q; want %q twice (Node and NodeClaim), once each", got, want)
	}
}

// TestReconcileRequeuesOnANodeConflict: the Node changed since the cache's
// copy (kwok's or the kubelet's status, kube-controller-manager's taint),
// so the write of its taint or its finalizer gets a 409. That is not an
// error (the 500-pod head-to-head of 2026-11-29 logged it as a "Reconciler
// error"): the reconcile runs again soon from a fresh read, and then
// releases the Node. The control: another API error stays an error.
func TestReconcileRequeuesOnANodeConflict(t *testing.T) {
	for _, tt := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"conflict", apierrors.NewConflict(corev1.Resource("nodes"), "n1", errors.New("the object has been modified")), false},
		{"server error (control)", apierrors.NewInternalError(errors.New("etcd unavailable")), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fail := true
			funcs := interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if _, ok := obj.(*corev1.Node); ok && fail {
					fail = false
					return tt.err
				}
				return c.Patch(ctx, obj, patch, opts...)
			}}
			c, kube := newNodeControllerWith(t, &countingCloud{}, funcs, deletingNode(), registeredClaim())
			res, err := reconcileNode(t, c)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Reconcile = %+v, nil; want the server's error", res)
				}
			} else if err != nil || res.RequeueAfter != clusterstate.ConflictRequeue {
				t.Fatalf("Reconcile = %+v, %v; want a requeue after %s and no error", res, err, clusterstate.ConflictRequeue)
			}
			if _, err := reconcileNode(t, c); err != nil {
				t.Fatalf("the reconcile after: %v", err)
			}
			if !nodeReleased(t, kube) {
				t.Error("the Node was not released by the reconcile after")
			}
		})
	}
}

// TestReconcileWritesPastItsOwnWriteInAStaleCache: the Node has a pod, so
// the first reconcile writes Drained=Unknown and evicts it; the second
// reads the cache's copy from before that write (the cache lags by a
// moment on a busy API server: 41 of 47 conflicts in a 500-pod
// head-to-head). The controller that made the write uses what it returned
// and writes the rest of the termination without a conflict or a fresh
// read. The control is a new controller for the second reconcile (one
// that restarted in between: no memory of the write), which gets the 409,
// reads afresh and writes again; both end with the instance terminated,
// Drained True and the Node released.
func TestReconcileWritesPastItsOwnWriteInAStaleCache(t *testing.T) {
	for _, tt := range []struct {
		name               string
		restart            bool
		conflicts, freshes int
	}{
		{"same controller", false, 0, 0},
		{"restarted controller (control)", true, 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := &countingCloud{}
			sc := newStaleCache(t, deletingNode(), registeredClaim(), pod("web"))
			api, kube := sc.api, sc.kube
			freshes := 0
			reader := interceptor.NewClient(api, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
				if _, ok := o.(*karpv1.NodeClaim); ok {
					freshes++
				}
				return c.Get(ctx, key, o, opts...)
			}})
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
			c := NewNodeController(kube, reader, cloud, record.NewFakeRecorder(100), clk)
			if _, err := reconcileNode(t, c); err != nil {
				t.Fatal(err)
			}
			if cond := claimCondition(t, api, karpv1.ConditionTypeDrained); cond == nil || cond.IsTrue() || nodeReleased(t, api) {
				t.Fatalf("after the first reconcile: Drained %+v, released %t; want Drained written not True (the pod evicted), the Node kept", cond, nodeReleased(t, api))
			}
			if tt.restart {
				c = NewNodeController(kube, reader, cloud, record.NewFakeRecorder(100), clk)
			}
			if _, err := reconcileNode(t, c); err != nil {
				t.Fatal(err)
			}
			if sc.conflicts != tt.conflicts || freshes != tt.freshes {
				t.Errorf("%d conflicts and %d fresh reads of the NodeClaim, want %d and %d", sc.conflicts, freshes, tt.conflicts, tt.freshes)
			}
			if cloud.deletes != 1 || !nodeReleased(t, api) || !claimTerminating(t, api) || !claimCondition(t, api, karpv1.ConditionTypeDrained).IsTrue() {
				t.Errorf("%d Deletes, released %t, InstanceTerminating %t, Drained %+v; want 1, true, true, True",
					cloud.deletes, nodeReleased(t, api), claimTerminating(t, api), claimCondition(t, api, karpv1.ConditionTypeDrained))
			}
		})
	}
}
