package scheduling

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// variants returns the ways Solve tries to schedule pod, strictest first,
// as Karpenter relaxes preferences (sigs.k8s.io/karpenter v1.13.0
// pkg/controllers/provisioning/scheduling/preferences.go): first every
// preference is required (preferred pod affinity and anti-affinity terms,
// the heaviest preferred node affinity term ANDed into the required node
// affinity, ScheduleAnyway topology spread as DoNotSchedule); then, one
// variant at a time, the heaviest remaining preferred pod affinity term is
// dropped, then the pod anti-affinity ones, then the node affinity ones,
// then the ScheduleAnyway spread constraints. The last variant has only
// the pod's required constraints. A pod without preferences has one
// variant, the pod itself.
func variants(pod *corev1.Pod) []*corev1.Pod {
	var podAff, podAnti []corev1.WeightedPodAffinityTerm
	var nodeAff []corev1.PreferredSchedulingTerm
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			podAff = byWeight(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAntiAffinity != nil {
			podAnti = byWeight(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.NodeAffinity != nil {
			nodeAff = append(nodeAff, a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
			sort.SliceStable(nodeAff, func(i, j int) bool { return nodeAff[i].Weight > nodeAff[j].Weight })
		}
	}
	var anyway []corev1.TopologySpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			anyway = append(anyway, c)
		}
	}
	if len(podAff)+len(podAnti)+len(nodeAff)+len(anyway) == 0 {
		return []*corev1.Pod{pod}
	}
	var out []*corev1.Pod
	for {
		out = append(out, view(pod, podAff, podAnti, nodeAff, anyway))
		switch {
		case len(podAff) > 0:
			podAff = podAff[1:]
		case len(podAnti) > 0:
			podAnti = podAnti[1:]
		case len(nodeAff) > 0:
			nodeAff = nodeAff[1:]
		case len(anyway) > 0:
			anyway = anyway[1:]
		default:
			return out
		}
	}
}

func byWeight(terms []corev1.WeightedPodAffinityTerm) []corev1.WeightedPodAffinityTerm {
	out := append([]corev1.WeightedPodAffinityTerm(nil), terms...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}

// view returns a copy of pod with the given preferences made required and
// every other preference removed. pod is not modified.
func view(pod *corev1.Pod, podAff, podAnti []corev1.WeightedPodAffinityTerm, nodeAff []corev1.PreferredSchedulingTerm, anyway []corev1.TopologySpreadConstraint) *corev1.Pod {
	out := *pod
	out.Spec.TopologySpreadConstraints = nil
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			out.Spec.TopologySpreadConstraints = append(out.Spec.TopologySpreadConstraints, c)
		}
	}
	for _, c := range anyway {
		c.WhenUnsatisfiable = corev1.DoNotSchedule
		out.Spec.TopologySpreadConstraints = append(out.Spec.TopologySpreadConstraints, c)
	}
	a := &corev1.Affinity{}
	var orig corev1.Affinity
	if pod.Spec.Affinity != nil {
		orig = *pod.Spec.Affinity
	}
	var requiredAff, requiredAnti []corev1.PodAffinityTerm
	if orig.PodAffinity != nil {
		requiredAff = append(requiredAff, orig.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	for _, t := range podAff {
		requiredAff = append(requiredAff, t.PodAffinityTerm)
	}
	if orig.PodAntiAffinity != nil {
		requiredAnti = append(requiredAnti, orig.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	for _, t := range podAnti {
		requiredAnti = append(requiredAnti, t.PodAffinityTerm)
	}
	if len(requiredAff) > 0 {
		a.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: requiredAff}
	}
	if len(requiredAnti) > 0 {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: requiredAnti}
	}
	var required *corev1.NodeSelector
	if orig.NodeAffinity != nil {
		required = orig.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if len(nodeAff) > 0 {
		pref := nodeAff[0].Preference
		ns := &corev1.NodeSelector{}
		if required == nil || len(required.NodeSelectorTerms) == 0 {
			ns.NodeSelectorTerms = []corev1.NodeSelectorTerm{pref}
		}
		if required != nil {
			for _, t := range required.NodeSelectorTerms {
				ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{
					MatchExpressions: append(append([]corev1.NodeSelectorRequirement(nil), t.MatchExpressions...), pref.MatchExpressions...),
					MatchFields:      append(append([]corev1.NodeSelectorRequirement(nil), t.MatchFields...), pref.MatchFields...),
				})
			}
		}
		required = ns
	}
	if required != nil {
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}
	}
	out.Spec.Affinity = a
	return &out
}
