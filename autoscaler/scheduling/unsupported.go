package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Unsupported returns "" when Solve models every scheduling constraint of
// pod that the kube-scheduler enforces, otherwise a short reason naming the
// first one it does not, e.g. "pod affinity on topology key
// example.com/rack is not modelled". Preferences (preferred affinity,
// ScheduleAnyway spread) never make a pod unsupported: the kube-scheduler
// only scores them. Consolidation uses it to refuse moving pods Solve
// cannot place faithfully.
//
// Not modelled: topology keys other than topology.kubernetes.io/zone,
// kubernetes.io/hostname and karpenter.sh/capacity-type; pod affinity
// terms whose namespaceSelector selects namespaces by label; invalid
// label selectors; dynamic resource claims (spec.resourceClaims).
func Unsupported(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		if _, ok := topologyKeyIndex(c.TopologyKey); !ok {
			return fmt.Sprintf("topology spread on topology key %s is not modelled", c.TopologyKey)
		}
		if !validSelector(c.LabelSelector) {
			return fmt.Sprintf("topology spread on %s has an invalid label selector", c.TopologyKey)
		}
	}
	if a := pod.Spec.Affinity; a != nil {
		var terms []corev1.PodAffinityTerm
		what := map[int]string{}
		if a.PodAffinity != nil {
			terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		for i := range terms {
			what[i] = "pod affinity"
		}
		if a.PodAntiAffinity != nil {
			terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		for i, t := range terms {
			kind, ok := what[i]
			if !ok {
				kind = "pod anti-affinity"
			}
			if _, ok := topologyKeyIndex(t.TopologyKey); !ok {
				return fmt.Sprintf("%s on topology key %s is not modelled", kind, t.TopologyKey)
			}
			if !emptySelector(t.NamespaceSelector) {
				return fmt.Sprintf("%s on %s selects namespaces by label (namespaceSelector), which is not modelled", kind, t.TopologyKey)
			}
			if !validSelector(t.LabelSelector) {
				return fmt.Sprintf("%s on %s has an invalid label selector", kind, t.TopologyKey)
			}
		}
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return "dynamic resource claims (spec.resourceClaims) are not modelled"
	}
	return ""
}

func validSelector(s *metav1.LabelSelector) bool {
	if s == nil {
		return true
	}
	_, err := metav1.LabelSelectorAsSelector(s)
	return err == nil
}
