package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Unsupported returns "" when Solve models every scheduling constraint of
// pod that the kube-scheduler enforces, otherwise a short reason naming the
// first one it does not, e.g. "pod affinity on kubernetes.io/hostname has
// an invalid label selector". Preferences (preferred affinity,
// ScheduleAnyway spread) never make a pod unsupported: the kube-scheduler
// only scores them. Consolidation uses it to refuse moving pods Solve
// cannot place faithfully.
//
// Topology spread and pod (anti-)affinity are modelled on any topology key
// (see topology_keys.go), and namespaceSelector is resolved against
// Input.NamespaceLabels, which a caller with such pods must fill. Not
// modelled: invalid label selectors (and namespace selectors); dynamic
// resource claims (spec.resourceClaims).
func Unsupported(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		if !validSelector(c.LabelSelector) {
			return fmt.Sprintf("topology spread on %s has an invalid label selector", c.TopologyKey)
		}
	}
	if a := pod.Spec.Affinity; a != nil {
		check := func(kind string, terms []corev1.PodAffinityTerm) string {
			for _, t := range terms {
				if !validSelector(t.LabelSelector) {
					return fmt.Sprintf("%s on %s has an invalid label selector", kind, t.TopologyKey)
				}
				if !validSelector(t.NamespaceSelector) {
					return fmt.Sprintf("%s on %s has an invalid namespaceSelector", kind, t.TopologyKey)
				}
			}
			return ""
		}
		if a.PodAffinity != nil {
			if why := check("pod affinity", a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution); why != "" {
				return why
			}
		}
		if a.PodAntiAffinity != nil {
			if why := check("pod anti-affinity", a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution); why != "" {
				return why
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
