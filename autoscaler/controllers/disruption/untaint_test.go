package disruption

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// taintedNodeFixture is a fake API server holding Node n1 with the
// karpenter.sh/disrupted taint and a startup taint, a copy of the Node as
// the cache held it, and then a write by someone else (a label, as a
// kubelet's or another controller's write would), so the copy is stale.
func taintedNodeFixture(t *testing.T) (client.Client, *corev1.Node) {
	t.Helper()
	other := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{other, karpv1.DisruptedNoScheduleTaint}}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(node).Build()
	ctx := context.Background()
	stale := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "n1"}, stale); err != nil {
		t.Fatal(err)
	}
	now := stale.DeepCopy()
	now.Labels = map[string]string{"example.com/written-later": "true"}
	if err := kube.Update(ctx, now); err != nil {
		t.Fatal(err)
	}
	return kube, stale
}

// TestUntaintRetriesOnAFreshReadAfterAConflict: a command that did not
// start releases its candidate's Node although the Node changed since the
// cache's copy (the 2,000-pod head-to-head's one error line, 2026-11-29:
// "removing the disrupted taint ... the object has been modified"); the
// write keeps the other taint and the other writer's label.
func TestUntaintRetriesOnAFreshReadAfterAConflict(t *testing.T) {
	kube, stale := taintedNodeFixture(t)
	ctx := context.Background()
	// The stale copy's write conflicts: what the retry is for.
	if err := clientsOnly(kube).setDisruptedTaint(ctx, stale.DeepCopy(), false); !apierrors.IsConflict(err) {
		t.Fatalf("write from the stale copy: got %v, want a conflict", err)
	}
	clientsOnly(kube).untaint(ctx, []*candidate{{nc: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc1"}}, node: stale.DeepCopy()}})
	got := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "n1"}, got); err != nil {
		t.Fatal(err)
	}
	if hasDisruptedTaint(got) {
		t.Errorf("taints %v: karpenter.sh/disrupted still there", got.Spec.Taints)
	}
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "example.com/agent-not-ready" {
		t.Errorf("taints %v: want only example.com/agent-not-ready", got.Spec.Taints)
	}
	if got.Labels["example.com/written-later"] != "true" {
		t.Errorf("labels %v: the other writer's label was lost", got.Labels)
	}
}

// TestReleaseTaintOfANodeGone: a Node deleted since the cache's copy has
// no taint to release, and that is not an error.
func TestReleaseTaintOfANodeGone(t *testing.T) {
	kube, stale := taintedNodeFixture(t)
	ctx := context.Background()
	if err := kube.Delete(ctx, stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if released, err := clientsOnly(kube).releaseTaint(ctx, stale.DeepCopy()); err != nil || released {
		t.Errorf("releaseTaint of a deleted Node: released %v, %v; want false, nil", released, err)
	}
}

// orphanState is a disruption pass's state holding node (the cache's
// copy) with NodeClaim nc1 and nothing that holds its taint.
func orphanState(node *corev1.Node) *state {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc1", Labels: map[string]string{karpv1.NodePoolLabelKey: "p"}}}
	return &state{cluster: &clusterstate.Snapshot{Nodes: map[string]*corev1.Node{node.Name: node},
		NodeClaimOf: map[string]*karpv1.NodeClaim{node.Name: nc}}}
}

// TestOrphanSweepAfterItsOwnReleaseInTheCache: a pass released a
// candidate's taint and the next pass's cache still shows it (the 500-pod
// head-to-head of 2026-11-29 failed a disruption pass on this conflict).
// The sweep finds nothing to remove on its fresh read and does not fail.
func TestOrphanSweepAfterItsOwnReleaseInTheCache(t *testing.T) {
	kube, stale := taintedNodeFixture(t)
	ctx := context.Background()
	if _, err := clientsOnly(kube).releaseTaint(ctx, stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := clientsOnly(kube).releaseOrphanedTaints(ctx, orphanState(stale.DeepCopy())); err != nil {
		t.Errorf("orphan sweep from a copy older than its own release: %v, want nil", err)
	}
	got := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "n1"}, got); err != nil {
		t.Fatal(err)
	}
	if hasDisruptedTaint(got) || got.Labels["example.com/written-later"] != "true" {
		t.Errorf("taints %v, labels %v: want no karpenter.sh/disrupted and the other writer's label", got.Spec.Taints, got.Labels)
	}
}

// TestOrphanSweepLeavesADeletingNodesTaint: a Node deleted since the
// cache's copy is draining, and its taint keeps pods off it: the sweep's
// fresh read sees the deletion and leaves the taint. The control: the
// same stale copy of a Node not being deleted is released.
func TestOrphanSweepLeavesADeletingNodesTaint(t *testing.T) {
	for _, deleting := range []bool{true, false} {
		kube, stale := taintedNodeFixture(t)
		ctx := context.Background()
		if deleting {
			now := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKey{Name: "n1"}, now); err != nil {
				t.Fatal(err)
			}
			now.Finalizers = []string{karpv1.TerminationFinalizer}
			if err := kube.Update(ctx, now); err != nil {
				t.Fatal(err)
			}
			if err := kube.Delete(ctx, now); err != nil {
				t.Fatal(err)
			}
		}
		if err := clientsOnly(kube).releaseOrphanedTaints(ctx, orphanState(stale.DeepCopy())); err != nil {
			t.Errorf("deleting %v: orphan sweep: %v, want nil", deleting, err)
		}
		got := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "n1"}, got); err != nil {
			t.Fatal(err)
		}
		if hasDisruptedTaint(got) != deleting {
			t.Errorf("deleting %v: karpenter.sh/disrupted on the Node %v, want %v", deleting, hasDisruptedTaint(got), deleting)
		}
	}
}

// clientsOnly is a Controller with only its clients, the fake server as both the
// cached client and the uncached reader: all that releaseTaint uses.
func clientsOnly(kube client.Client) *Controller { return &Controller{kube: kube, reader: kube} }
