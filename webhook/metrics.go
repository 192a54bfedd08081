package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// startupTaintsAdded counts taints added by the mutating webhook, by
	// rule name; dry-run requests are not counted.
	startupTaintsAdded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpx_webhook_startup_taints_added_total",
		Help: "Startup taints added to NodePools by the karpx mutating webhook, by rule (dry-run requests excluded).",
	}, []string{"rule"})
	// findingsTotal counts validation findings by rule ID and severity.
	findingsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpx_webhook_findings_total",
		Help: "Findings of the karpx validating webhook, by rule ID and severity (dry-run requests excluded).",
	}, []string{"rule", "severity"})
	// decisionsTotal counts the validating webhook's answers to CREATE and
	// UPDATE reviews, by resource ("nodepools", "ec2nodeclasses", "nodeoverlays") and
	// decision (DecisionAllowed, DecisionWarned, DecisionDenied); dry-run
	// reviews count too (a denied server-side dry run is a denial the user
	// sees).
	decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpx_webhook_decisions_total",
		Help: "Answers of the karpx validating webhook to CREATE and UPDATE reviews, by resource and decision (allowed, warned, denied).",
	}, []string{"resource", "decision"})
)

// Values of the decision label of karpx_webhook_decisions_total.
const (
	// DecisionAllowed: admitted without warnings.
	DecisionAllowed = "allowed"
	// DecisionWarned: admitted with warnings.
	DecisionWarned = "warned"
	// DecisionDenied: refused.
	DecisionDenied = "denied"
)

func init() {
	metrics.Registry.MustRegister(startupTaintsAdded, findingsTotal, decisionsTotal)
}
