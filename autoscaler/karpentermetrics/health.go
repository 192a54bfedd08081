package karpentermetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"
)

// Node repair's labels and reason, as sigs.k8s.io/karpenter v1.14.0
// pkg/controllers/node/health/metrics.go and pkg/metrics/constants.go name
// them.
const (
	// LabelCondition is the snake-cased type of the Node condition that
	// made node repair delete the NodeClaim ("ready", "networking_ready").
	LabelCondition = "condition"
	// LabelImageID is the NodeClaim's status.imageID ("ami-...").
	LabelImageID = "image_id"
	// ReasonUnhealthy is the karpenter_nodeclaims_disrupted_total reason
	// of a node repair (Karpenter's UnhealthyReason, "unhealthy").
	ReasonUnhealthy = kmetrics.UnhealthyReason
)

// NodeClaimsUnhealthyDisruptedTotal is
// karpenter_nodeclaims_unhealthy_disrupted_total{condition,nodepool,
// capacity_type,image_id}: NodeClaims node repair deleted (count).
// Redefined with Karpenter v1.14.0's name, help and labels
// (pkg/controllers/node/health/metrics.go), whose package karpx does not
// import.
var NodeClaimsUnhealthyDisruptedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: kmetrics.Namespace, Subsystem: kmetrics.NodeClaimSubsystem, Name: "unhealthy_disrupted_total",
	Help: "Number of unhealthy nodeclaims disrupted in total by Karpenter. Labeled by condition on the node was disrupted, the owning nodepool, and the image ID.",
}, []string{LabelCondition, LabelNodePool, LabelCapacityType, LabelImageID})

func init() {
	crmetrics.Registry.MustRegister(NodeClaimsUnhealthyDisruptedTotal)
}

// NodeClaimRepaired counts a node repair of nc, whose Node's condition
// of type condition was unhealthy past its toleration: once in
// karpenter_nodeclaims_disrupted_total with reason "unhealthy" and once in
// karpenter_nodeclaims_unhealthy_disrupted_total, as Karpenter v1.14.0's
// node health controller does.
func NodeClaimRepaired(nc *karpv1.NodeClaim, condition string) {
	NodeClaimDisrupted(nc, ReasonUnhealthy)
	NodeClaimsUnhealthyDisruptedTotal.WithLabelValues(snakeCase(condition), nc.Labels[karpv1.NodePoolLabelKey],
		nc.Labels[karpv1.CapacityTypeLabelKey], nc.Status.ImageID).Inc()
}
