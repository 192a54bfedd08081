package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/scheduling/volumetopology"
)

// landing reports why the reschedulable pods of nc's Node would not all
// land if nc were drained now, or "" when they would: they are placed, by
// the scheduling code consolidation simulates with, on the Nodes that can
// take pods at once (Initialized NodeClaims' Nodes and Nodes of no
// NodeClaim; none being deleted, tainted karpenter.sh/disrupted or
// interrupted), with no new node. The command's own replacements are among
// them, so this fails only when other pods took the room its simulation
// gave them. It returns an error when a pod's volume zones cannot be read.
func (c *Controller) landing(ctx context.Context, s *state, nc *karpv1.NodeClaim) (string, error) {
	node := s.cluster.NodeOf(nc)
	if node == nil {
		return "", nil
	}
	pods := reschedulable(s.cluster.Pods[node.Name])
	if len(pods) == 0 {
		return "", nil
	}
	in := scheduling.Input{
		DaemonSetPods:      s.daemonSets,
		VolumeRequirements: map[types.UID][]corev1.NodeSelectorRequirement{},
		NamespaceLabels:    s.namespaces,
		ExistingNodes: s.cluster.ExistingNodes(s.types, func(other *karpv1.NodeClaim) bool {
			return other.Name == nc.Name || interrupted(other) || !other.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()
		}),
	}
	for _, p := range pods {
		reqs, err := volumetopology.Requirements(ctx, c.kube, p)
		if err != nil {
			return "", fmt.Errorf("reading the volume zones of pod %s/%s on NodeClaim %s: %w", p.Namespace, p.Name, nc.Name, err)
		}
		if len(reqs) > 0 {
			in.VolumeRequirements[p.UID] = reqs
		}
		p = p.DeepCopy()
		p.Spec.NodeName = ""
		in.Pods = append(in.Pods, p)
	}
	res := scheduling.Solve(in)
	for _, p := range pods {
		if _, unplaced := res.Unschedulable[p.UID]; unplaced {
			return fmt.Sprintf("pod %s/%s no longer fits on the nodes ready for it: other pods took the room planned for it", p.Namespace, p.Name), nil
		}
	}
	return "", nil
}

// initializedAt returns when the last of the replacements reps became
// Initialized (the zero time when s holds none of them Initialized).
func initializedAt(s *state, reps []string) time.Time {
	var at time.Time
	for _, name := range reps {
		if r := s.cluster.NodeClaims[name]; r != nil {
			if cond := r.StatusConditions().Get(karpv1.ConditionTypeInitialized); cond.IsTrue() && cond.LastTransitionTime.After(at) {
				at = cond.LastTransitionTime.Time
			}
		}
	}
	return at
}
