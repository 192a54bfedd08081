package disruption

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// releaseOrphanedTaints removes karpenter.sh/disrupted from every Node that
// no disruption or termination holds: the Node and its NodeClaim are not
// being deleted and the NodeClaim records no replacements. execute taints
// candidates before it deletes them or records their replacements, so a
// controller killed (or a leader replaced) between the two leaves a taint
// that nothing would ever remove, and pods that do not tolerate it stay
// Pending beside a node with room. Karpenter removes such taints at the
// start of each disruption pass for the same reason; so does this, before
// any decision, so a pass never mistakes its own command in flight for an
// orphan (a pass runs one command at a time and waits for the cache to
// show it). Nodes without a NodeClaim are left alone: they are not karpx's.
// The cache may still show a taint this controller released in its last
// pass; releaseTaint's write from that copy conflicts, and its fresh read
// finds nothing to remove (the 500-pod head-to-head of 2026-11-29 failed a
// pass on that conflict). It returns the patch errors, joined.
func (c *Controller) releaseOrphanedTaints(ctx context.Context, s *state) error {
	var errs []error
	for name, node := range s.cluster.Nodes {
		if !node.DeletionTimestamp.IsZero() || !hasDisruptedTaint(node) {
			continue
		}
		nc := s.cluster.NodeClaimOf[name]
		if nc == nil || !nc.DeletionTimestamp.IsZero() || nc.Annotations[ReplacementsAnnotationKey] != "" {
			continue
		}
		released, err := c.releaseTaint(ctx, node.DeepCopy())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if released {
			logr.FromContextOrDiscard(ctx).Info("removed a karpenter.sh/disrupted taint that no disruption held (left by a stopped or replaced controller)",
				"Node", name, "NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey])
		}
	}
	return errors.Join(errs...)
}

// hasDisruptedTaint reports whether node carries a karpenter.sh/disrupted
// taint of any effect.
func hasDisruptedTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}
