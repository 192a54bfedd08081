package clusterstate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/catalog/startuptaints"
)

// DrainRequeue is how often a draining Node is looked at again while pods
// are leaving or a PodDisruptionBudget blocks them (termination), and how
// often a deleted NodeClaim looks at its draining Node and its instance
// again (lifecycle). Pod and Node deletions wake the controllers sooner.
const DrainRequeue = 2 * time.Second

// ConflictRequeue is how soon a controller reconciles again, from a fresh
// read, after a write made from its cache's copy lost an optimistic-lock
// conflict (409: the kubelet, kube-controller-manager or another
// controller changed the object first): about the first steps of
// controller-runtime's default per-item backoff (5 ms doubling), without
// its deprecated Result.Requeue, and without logging the conflict as an
// error. Used by lifecycle (a NodeClaim's Node and status writes) and
// termination (the draining Node's taint and finalizer).
const ConflictRequeue = 100 * time.Millisecond

// SetDisruptedTaint adds (on) or removes karpenter.sh/disrupted:NoSchedule
// on node, with an optimistic lock, and does nothing when node already is
// as asked (any taint with the disrupted key counts). It returns the
// patch's error. Termination and disruption both taint through
// it, as Karpenter's controllers do through its cluster state
// (sigs.k8s.io/karpenter v1.14.0 pkg/controllers/state,
// RequireNoScheduleTaint).
func SetDisruptedTaint(ctx context.Context, kube client.Client, node *corev1.Node, on bool) error {
	has := false
	var kept []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			has = true
			continue
		}
		kept = append(kept, t)
	}
	if has == on {
		return nil
	}
	stored := node.DeepCopy()
	if on {
		node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	} else {
		node.Spec.Taints = kept
	}
	if err := kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("setting %s on Node %s to %v: %w", karpv1.DisruptedTaintKey, node.Name, on, err)
	}
	return nil
}

// AgentTaint reports whether a taint is one a node agent puts on new nodes
// and removes once it is ready: the keys of the built-in startup taint rules
// of catalog/startuptaints (Cilium's node.cilium.io/agent-not-ready, the EBS
// and EFS CSI node plugins, Istio CNI), the rules the webhook adds to
// NodePools. A NodePool that does not declare them as startupTaints still
// gets them on its nodes (problem P4). It is what Grace.AgentTaint takes.
func AgentTaint() func(corev1.Taint) bool {
	keys := map[string]bool{}
	for _, r := range startuptaints.Builtin() {
		for _, t := range r.Taints {
			keys[t.Key] = true
		}
	}
	return func(t corev1.Taint) bool { return keys[t.Key] }
}
