package disruption

import (
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// decisionsTotal counts disruption commands started, by method (emptiness,
// drift, …), reason (Empty, Underutilized, Drifted, Expired) and decision
// (delete, replace).
var decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "karpx_disruption_decisions_total",
	Help: "Disruption commands started, by method, reason and decision (delete or replace).",
}, []string{"method", "reason", "decision"})

// blockedSeen remembers recent DisruptionBlocked events so a pass every
// 10 s does not repeat them.
var blockedSeen = expirable.NewLRU[string, struct{}](10000, nil, blockedEventTTL)

func init() {
	crmetrics.Registry.MustRegister(decisionsTotal)
}
