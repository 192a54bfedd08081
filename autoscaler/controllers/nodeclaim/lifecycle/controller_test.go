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
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	ec2v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
)

func newTestController(t *testing.T, now time.Time, objs ...client.Object) (*Controller, client.Client) {
	t.Helper()
	kube := fakeAPI(objs...)
	health := launchhealth.New(launchhealth.Options{BaseBackoff: time.Minute, MaxBackoff: time.Hour})
	c := New(kube, nil, record.NewFakeRecorder(100), health, Options{Clock: clocktesting.NewFakePassiveClock(now)})
	return c, kube
}

// fakeAPI returns a fake API server holding objs, with the NodeClaim status
// subresource and the Node providerID index the controller reads.
func fakeAPI(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&corev1.Node{}, clusterstate.NodeProviderIDField, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		Build()
}

func gpuClaim(created time.Time) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu-abc", UID: "uid-1", CreationTimestamp: metav1.NewTime(created),
		Labels: map[string]string{karpv1.NodePoolLabelKey: "gpu"}, Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "gpu"}}}
}

// A NodeClaim whose instance was created but whose status write failed is
// recorded at once, even though its pair is paused meanwhile.
func TestLaunchedInstanceRecordedDespitePairPause(t *testing.T) {
	now := time.Now()
	nc := gpuClaim(now)
	c, kube := newTestController(t, now, nc, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}},
		&ec2v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}})
	key, gens, ok := c.healthKey(context.Background(), nc)
	if !ok {
		t.Fatal("no health key")
	}
	for range 5 {
		c.health.Failure(key, gens, "LaunchFailed/InvalidParameterValue", "bad")
	}
	if paused, _ := c.health.Paused(key, gens); !paused {
		t.Fatal("pair not paused: the test would not test anything")
	}
	c.launched[nc.UID] = &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}
	if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}); err != nil {
		t.Fatal(err)
	}
	got := &karpv1.NodeClaim{}
	if err := kube.Get(context.Background(), types.NamespacedName{Name: nc.Name}, got); err != nil {
		t.Fatal(err)
	}
	if !got.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() || got.Status.ProviderID != "aws:///us-east-1a/i-0123456789abcdef0" {
		t.Fatalf("launched instance not recorded while the pair is paused: providerID %q", got.Status.ProviderID)
	}
}

func TestUnlaunchedNodeClaimDeletedAfterLaunchTTL(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		age     time.Duration
		deleted bool
	}{{4 * time.Minute, false}, {5 * time.Minute, true}} {
		nc := gpuClaim(now.Add(-tc.age))
		c, kube := newTestController(t, now, nc)
		c.failures[nc.UID] = launchFailures{count: 3, next: now.Add(time.Hour)} // backing off
		if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}); err != nil {
			t.Fatal(err)
		}
		got := &karpv1.NodeClaim{}
		err := kube.Get(context.Background(), types.NamespacedName{Name: nc.Name}, got)
		deleted := client.IgnoreNotFound(err) == nil && (err != nil || !got.DeletionTimestamp.IsZero())
		if deleted != tc.deleted {
			t.Errorf("unlaunched for %s: deleted %v, want %v", tc.age, deleted, tc.deleted)
		}
	}
}

func TestNodeNotReadyTooLongReportedNeverDeleted(t *testing.T) {
	now := time.Now()
	nc := gpuClaim(now.Add(-time.Hour))
	nc.Status.ProviderID = "aws:///us-east-1a/i-1"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			LastTransitionTime: metav1.NewTime(now.Add(-20 * time.Minute))}}}}
	c, kube := newTestController(t, now, nc, node)
	get := func() *karpv1.NodeClaim {
		got := &karpv1.NodeClaim{}
		if err := kube.Get(context.Background(), types.NamespacedName{Name: nc.Name}, got); err != nil {
			t.Fatalf("NodeClaim: %v", err)
		}
		return got
	}
	res, err := c.watchReady(context.Background(), get(), node)
	if err != nil || res.RequeueAfter != 10*time.Minute {
		t.Fatalf("NotReady 20m: requeue %s err %v, want 10m", res.RequeueAfter, err)
	}
	if cond := get().StatusConditions().Get(ConditionTypeNodeNotReady); cond != nil && cond.IsTrue() {
		t.Fatal("reported after 20m")
	}
	c.opts.Clock.(*clocktesting.FakePassiveClock).SetTime(now.Add(11 * time.Minute))
	if _, err := c.watchReady(context.Background(), get(), node); err != nil {
		t.Fatal(err)
	}
	got := get()
	if cond := got.StatusConditions().Get(ConditionTypeNodeNotReady); cond == nil || !cond.IsTrue() || cond.Reason != "NotReadyTooLong" {
		t.Fatalf("not reported after 31m: %+v", cond)
	}
	if !got.DeletionTimestamp.IsZero() {
		t.Fatal("NodeClaim deleted for a NotReady node")
	}
	node.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := c.watchReady(context.Background(), got, node); err != nil {
		t.Fatal(err)
	}
	if cond := get().StatusConditions().Get(ConditionTypeNodeNotReady); cond == nil || cond.IsTrue() {
		t.Fatalf("report not cleared once Ready: %+v", cond)
	}
}
