package status

import (
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Unhealthy says what is wrong with node, the Node of nc, or "" when
// nothing is: each condition whose type ends in "Ready" (kubelet's Ready,
// the EKS node monitoring agent's AcceleratedHardwareReady, StorageReady,
// NetworkingReady, KernelReady, ContainerRuntimeReady: the conditions of
// the AWS provider's repair policies) with a status other than True, as
// "Type=Status for AGE (Reason)", and whether node repair has taken the
// node: "being repaired" once nc is deleted with a
// karpenter.sh/nodeclaim-termination-timestamp (pods deleted, not
// evicted). The plugin cannot read the controller's feature gates or the
// policies' toleration durations; docs/node-repair.md lists them.
func Unhealthy(nc *karpv1.NodeClaim, node *corev1.Node, now time.Time) string {
	var bad []string
	for _, c := range node.Status.Conditions {
		if !strings.HasSuffix(string(c.Type), "Ready") || c.Status == corev1.ConditionTrue {
			continue
		}
		s := fmt.Sprintf("%s=%s for %s", c.Type, c.Status, duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)))
		if c.Reason != "" {
			s += " (" + c.Reason + ")"
		}
		bad = append(bad, s)
	}
	if len(bad) == 0 {
		return ""
	}
	out := strings.Join(bad, ", ")
	if stamp, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok && !nc.DeletionTimestamp.IsZero() {
		out += "; being repaired (pods deleted from " + stamp + ")"
	}
	return out
}

// printUnhealthy writes one line per NodeClaim whose Node is unhealthy
// (Unhealthy); nothing when none is.
func printUnhealthy(w io.Writer, claims []karpv1.NodeClaim, nodes []corev1.Node, now time.Time) {
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	first := true
	for i := range claims {
		node := byName[claims[i].Status.NodeName]
		if node == nil {
			continue
		}
		why := Unhealthy(&claims[i], node, now)
		if why == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nUnhealthy nodes:")
			first = false
		}
		fmt.Fprintf(w, "  %s (%s, node %s): %s\n", claims[i].Name, Phase(&claims[i]), node.Name, why)
	}
}
