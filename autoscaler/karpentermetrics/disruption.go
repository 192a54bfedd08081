package karpentermetrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"
)

// Voluntary disruption's labels and values, as sigs.k8s.io/karpenter
// v1.14.0 pkg/controllers/disruption/metrics.go and types.go name them.
const (
	// LabelDecision is "delete" (the candidates go, nothing is launched)
	// or "replace" (replacements are launched first).
	LabelDecision = "decision"
	// LabelConsolidationType is "empty" (emptiness), "multi" (multi-node
	// consolidation), "single" (single-node consolidation), or "" for
	// drift.
	LabelConsolidationType = "consolidation_type"

	// ConsolidationTypeEmpty, ConsolidationTypeMulti and
	// ConsolidationTypeSingle are the consolidation_type values of
	// Karpenter's emptiness, multi-node and single-node consolidation
	// methods; drift has "".
	ConsolidationTypeEmpty  = "empty"
	ConsolidationTypeMulti  = "multi"
	ConsolidationTypeSingle = "single"
)

const voluntaryDisruptionSubsystem = "voluntary_disruption"

// VoluntaryDisruptionDecisionsTotal is
// karpenter_voluntary_disruption_decisions_total{decision,reason,consolidation_type}:
// disruption commands started (count), reason lower-cased ("drifted",
// "empty", "underutilized"). Redefined with Karpenter v1.14.0's name, help
// and labels (pkg/controllers/disruption/metrics.go), whose package karpx
// does not import.
var VoluntaryDisruptionDecisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: kmetrics.Namespace, Subsystem: voluntaryDisruptionSubsystem, Name: "decisions_total",
	Help: "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
}, []string{LabelDecision, LabelReason, LabelConsolidationType})

// VoluntaryDisruptionDecisionsByNodePoolTotal is
// karpenter_voluntary_disruption_decisions_by_nodepool_total{nodepool,decision,reason,consolidation_type}:
// the same commands counted once per NodePool among their candidates'
// (count; Karpenter v1.14.0 pkg/controllers/disruption/metrics.go).
var VoluntaryDisruptionDecisionsByNodePoolTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: kmetrics.Namespace, Subsystem: voluntaryDisruptionSubsystem, Name: "decisions_by_nodepool_total",
	Help: "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, reason, and consolidation type.",
}, []string{LabelNodePool, LabelDecision, LabelReason, LabelConsolidationType})

// VoluntaryDisruptionEligibleNodes is
// karpenter_voluntary_disruption_eligible_nodes{reason}: the nodes a
// disruption method looked at in the last pass that are candidates for
// it (count; Karpenter v1.14.0 pkg/controllers/disruption/metrics.go).
var VoluntaryDisruptionEligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: kmetrics.Namespace, Subsystem: voluntaryDisruptionSubsystem, Name: "eligible_nodes",
	Help: "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
}, []string{LabelReason})

// NodePoolAllowedDisruptions is
// karpenter_nodepools_allowed_disruptions{nodepool,reason}: how many of a
// NodePool's nodes its disruption budgets let be disrupting at once for
// reason ("Drifted", "Empty", "Underutilized", not lower-cased, as
// Karpenter v1.14.0 pkg/controllers/disruption/helpers.go sets it), before
// the nodes already disrupting are subtracted (count).
var NodePoolAllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: kmetrics.Namespace, Subsystem: kmetrics.NodePoolSubsystem, Name: "allowed_disruptions",
	Help: "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
}, []string{LabelNodePool, LabelReason})

// NodePoolNodesConsumingBudgets is
// karpenter_nodepools_nodes_consuming_budgets{nodepool,reason}: a
// NodePool's nodes that count against its budgets now (being deleted, or
// waiting for their replacements) (count; Karpenter v1.14.0
// pkg/controllers/disruption/metrics.go).
var NodePoolNodesConsumingBudgets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: kmetrics.Namespace, Subsystem: kmetrics.NodePoolSubsystem, Name: "nodes_consuming_budgets",
	Help: "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
}, []string{LabelNodePool, LabelReason})

func init() {
	crmetrics.Registry.MustRegister(VoluntaryDisruptionDecisionsTotal, VoluntaryDisruptionDecisionsByNodePoolTotal,
		VoluntaryDisruptionEligibleNodes, NodePoolAllowedDisruptions, NodePoolNodesConsumingBudgets)
}

// DisruptionDecided counts one voluntary disruption command started, with
// decision DecisionDelete or DecisionReplace's value ("delete",
// "replace"), reason the disruption reason ("Drifted", "Empty",
// "Underutilized"; lower-cased here as Karpenter v1.14.0
// pkg/controllers/disruption/queue.go does), consolidationType one of the
// ConsolidationType* values or "" for drift, and nodePools its
// candidates' NodePools (each counted once). Expiration and interruption
// are not voluntary disruption in Karpenter v1 and are not counted here.
func DisruptionDecided(decision, reason, consolidationType string, nodePools []string) {
	reason = strings.ToLower(reason)
	VoluntaryDisruptionDecisionsTotal.WithLabelValues(decision, reason, consolidationType).Inc()
	seen := make(map[string]bool, len(nodePools))
	for _, p := range nodePools {
		if !seen[p] {
			seen[p] = true
			VoluntaryDisruptionDecisionsByNodePoolTotal.WithLabelValues(p, decision, reason, consolidationType).Inc()
		}
	}
}

// DisruptionEligible sets karpenter_voluntary_disruption_eligible_nodes for
// reason (lower-cased, as Karpenter v1.14.0's controller.go) to n nodes.
func DisruptionEligible(reason string, n int) {
	VoluntaryDisruptionEligibleNodes.WithLabelValues(strings.ToLower(reason)).Set(float64(n))
}

// DisruptionBudget sets the budget gauges of nodePool for reason: allowed
// is what its budgets allow (MustGetAllowedDisruptions), consuming the
// nodes disrupting now.
func DisruptionBudget(nodePool, reason string, allowed, consuming int) {
	NodePoolAllowedDisruptions.WithLabelValues(nodePool, reason).Set(float64(allowed))
	NodePoolNodesConsumingBudgets.WithLabelValues(nodePool, reason).Set(float64(consuming))
}

// ForgetNodePool removes the budget gauges of a deleted NodePool, so
// that dashboards do not keep showing it.
func ForgetNodePool(nodePool string) {
	NodePoolAllowedDisruptions.DeletePartialMatch(prometheus.Labels{LabelNodePool: nodePool})
	NodePoolNodesConsumingBudgets.DeletePartialMatch(prometheus.Labels{LabelNodePool: nodePool})
}

// NodeRegistered counts the Node of nc in karpenter_nodes_created_total
// when nc becomes Registered, as Karpenter v1.14.0
// pkg/controllers/nodeclaim/lifecycle/registration.go does. The family is
// the sigs.k8s.io/karpenter v1.13.0 definition go.mod pins, labelled by
// nodepool only (v1.14.0 added zone).
func NodeRegistered(nc *karpv1.NodeClaim) {
	kmetrics.NodesCreatedTotal.Inc(map[string]string{LabelNodePool: nc.Labels[karpv1.NodePoolLabelKey]})
}
