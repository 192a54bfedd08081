package status

import (
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// staticLine is the "Static NodePools" line of a static NodePool (one with
// spec.replicas, docs/static-capacity.md): desired is spec.replicas,
// current the NodePool's NodeClaims not being deleted (what the static
// controller counts towards it), of which ready are Initialized; deleting
// are those being deleted (replaced or scaled in); limits.nodes, when set,
// caps current plus deleting. It is "" for a NodePool without replicas.
func staticLine(np *karpv1.NodePool, claims []karpv1.NodeClaim) string {
	if np.Spec.Replicas == nil {
		return ""
	}
	var current, ready, deleting int64
	for i := range claims {
		nc := &claims[i]
		if nc.Labels[karpv1.NodePoolLabelKey] != np.Name {
			continue
		}
		if !nc.DeletionTimestamp.IsZero() {
			deleting++
			continue
		}
		current++
		if nodeClaimCondition(nc, karpv1.ConditionTypeInitialized) == "True" {
			ready++
		}
	}
	desired := *np.Spec.Replicas
	out := fmt.Sprintf("%s: desired %d, current %d (ready %d), deleting %d", np.Name, desired, current, ready, deleting)
	if q, ok := np.Spec.Limits[corev1.ResourceName("nodes")]; ok {
		out += fmt.Sprintf(", limits.nodes %d", q.Value())
	}
	switch {
	case current < desired:
		out += fmt.Sprintf("; launching %d", desired-current)
	case current > desired:
		out += fmt.Sprintf("; scaling in %d", current-desired)
	}
	return out
}

// printStatic writes the "Static NodePools" section, one staticLine per
// static NodePool; nothing when there is none.
func printStatic(w io.Writer, pools []karpv1.NodePool, claims []karpv1.NodeClaim) {
	first := true
	for i := range pools {
		line := staticLine(&pools[i], claims)
		if line == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nStatic NodePools (spec.replicas):")
			first = false
		}
		fmt.Fprintf(w, "  %s\n", line)
	}
}
