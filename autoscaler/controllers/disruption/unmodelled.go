package disruption

import corev1 "k8s.io/api/core/v1"

// unmodelled returns why the scheduling code cannot tell where pod may go,
// or "" when it can.
func unmodelled(pod *corev1.Pod) string {
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return "required pod affinity is not modelled"
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return "required pod anti-affinity is not modelled"
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return "topology spread constraints are not modelled"
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				return "host ports are not modelled"
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return "volume topology is not modelled"
		}
	}
	return ""
}
