package karpentermetrics

import (
	"regexp"
	"strings"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// NodeClaimCreated counts nc in karpenter_nodeclaims_created_total. reason
// is ReasonProvisioned for the provisioner's NodeClaims and the disruption
// reason ("Underutilized", "Drifted", ...) for replacements, which is
// lower-cased as Karpenter v1.13.0 does (pkg/controllers/disruption/queue.go).
// min_values_relaxed is the NodeClaim's
// karpenter.sh/nodeclaim-min-values-relaxed annotation, "false" without it.
func NodeClaimCreated(nc *karpv1.NodeClaim, reason string) {
	relaxed, ok := nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]
	if !ok {
		relaxed = "false"
	}
	NodeClaimsCreatedTotal.Inc(map[string]string{
		LabelReason:           strings.ToLower(reason),
		LabelNodePool:         nc.Labels[karpv1.NodePoolLabelKey],
		LabelMinValuesRelaxed: relaxed,
	})
}

// NodeClaimTerminated counts nc in karpenter_nodeclaims_terminated_total
// once its termination finished (the finalizer is about to be removed).
func NodeClaimTerminated(nc *karpv1.NodeClaim) {
	NodeClaimsTerminatedTotal.Inc(map[string]string{
		LabelNodePool:     nc.Labels[karpv1.NodePoolLabelKey],
		LabelCapacityType: nc.Labels[karpv1.CapacityTypeLabelKey],
	})
}

// NodeClaimDisrupted counts nc in karpenter_nodeclaims_disrupted_total.
// reason is snake-cased as Karpenter v1.13.0 does
// (pkg/controllers/disruption/queue.go): "Underutilized" → "underutilized",
// "Drifted" → "drifted", "InsufficientCapacity" → "insufficient_capacity".
func NodeClaimDisrupted(nc *karpv1.NodeClaim, reason string) {
	NodeClaimsDisruptedTotal.Inc(map[string]string{
		LabelReason:       snakeCase(reason),
		LabelNodePool:     nc.Labels[karpv1.NodePoolLabelKey],
		LabelCapacityType: nc.Labels[karpv1.CapacityTypeLabelKey],
	})
}

// ObserveScheduling records one scheduling simulation of controller
// (ControllerProvisioner or ControllerDisruption) that took took (measured
// on the controller's injected clock), in seconds, under both
// karpenter_scheduler_scheduling_duration_seconds and its pre-v1 name
// karpenter_provisioner_scheduling_duration_seconds.
func ObserveScheduling(controller string, took time.Duration) {
	s := took.Seconds()
	SchedulingDurationSeconds.WithLabelValues(controller).Observe(s)
	ProvisionerSchedulingDurationSeconds.WithLabelValues(controller).Observe(s)
}

// snakeCase is Karpenter v1.13.0's pretty.ToSnakeCase
// (pkg/utils/pretty/pretty.go; that package pulls in caching modules karpx
// does not use): "InsufficientCapacity" → "insufficient_capacity".
func snakeCase(s string) string {
	s = matchFirstCap.ReplaceAllString(s, "${1}_${2}")
	return strings.ToLower(matchAllCap.ReplaceAllString(s, "${1}_${2}"))
}

var (
	matchFirstCap = regexp.MustCompile("(.)([A-Z][a-z]+)")
	matchAllCap   = regexp.MustCompile("([a-z0-9])([A-Z])")
)
