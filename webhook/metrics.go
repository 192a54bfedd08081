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
)

func init() {
	metrics.Registry.MustRegister(startupTaintsAdded, findingsTotal)
}
