package disruption

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/karpentermetrics"
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

// consolidationTypes maps the voluntary disruption methods to Karpenter
// v1.14.0's consolidation_type label (each method's ConsolidationType() in
// pkg/controllers/disruption): drift "", emptiness "empty", multi-node
// "multi", single-node "single". Expiration and interruption are not
// voluntary disruption in Karpenter v1 and have no entry.
var consolidationTypes = map[string]string{
	MethodDrift:      "",
	MethodEmptiness:  karpentermetrics.ConsolidationTypeEmpty,
	MethodMultiNode:  karpentermetrics.ConsolidationTypeMulti,
	MethodSingleNode: karpentermetrics.ConsolidationTypeSingle,
}

// budgetReasons are the disruption reasons Karpenter v1.14.0 sets the
// budget gauges for, once per method each pass.
var budgetReasons = []string{ReasonDrifted, ReasonEmpty, ReasonUnderutilized}

// recordPassMetrics sets, from the pass's state, Karpenter's budget gauges
// (karpenter_nodepools_allowed_disruptions and
// karpenter_nodepools_nodes_consuming_budgets, per NodePool and reason)
// and karpenter_voluntary_disruption_eligible_nodes (per reason: drifted
// candidates, empty consolidatable ones, and those consolidation may
// move), and drops the gauges of NodePools gone since the last pass.
func (c *Controller) recordPassMetrics(s *state) {
	// zeroBudget holds "NodePool/reason" for each NodePool with nodes whose
	// budgets allow no disruption for reason now (budgetBlocked).
	zeroBudget := map[string]bool{}
	for name, pool := range s.pools {
		for _, reason := range budgetReasons {
			allowed := pool.MustGetAllowedDisruptions(c.clock, s.total[name], karpv1.DisruptionReason(reason))
			karpentermetrics.DisruptionBudget(name, reason, allowed, s.disrupting[name])
			if allowed == 0 && s.total[name] != 0 {
				zeroBudget[name+"/"+reason] = true
			}
		}
	}
	c.metricsMu.Lock()
	for name := range c.poolsWithGauges {
		if s.pools[name] == nil {
			karpentermetrics.ForgetNodePool(name)
		}
	}
	c.poolsWithGauges = make(map[string]bool, len(s.pools))
	for name := range s.pools {
		c.poolsWithGauges[name] = true
	}
	c.metricsMu.Unlock()

	drifted, empty, underutilized := 0, 0, 0
	for _, cand := range s.candidates {
		if cond := cand.nc.StatusConditions().Get(karpv1.ConditionTypeDrifted); cond != nil && cond.IsTrue() && cand.eventualBlock() == "" {
			drifted++
		}
		if len(cand.pods) == 0 && cand.blocked == "" && cand.consolidatable(s.now) {
			empty++
		}
		if cand.pool.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized &&
			cand.blocked == "" && cand.consolidatable(s.now) && len(cand.pods) > 0 && cand.price > 0 && cand.unmodelled == "" {
			underutilized++
		}
	}
	karpentermetrics.DisruptionEligible(ReasonDrifted, drifted)
	karpentermetrics.DisruptionEligible(ReasonEmpty, empty)
	karpentermetrics.DisruptionEligible(ReasonUnderutilized, underutilized)
	eligible := map[string]int{ReasonDrifted: drifted, ReasonEmpty: empty, ReasonUnderutilized: underutilized}
	for _, reason := range budgetReasons {
		if eligible[reason] > 0 {
			c.budgetBlocked(s, reason, zeroBudget)
		}
	}
}

// PoolBlockedDedupe is the shortest time between two DisruptionBlocked
// events on one NodePool for one reason: 1 minute, Karpenter's
// DedupeTimeout for NodePoolBlockedForDisruptionReason
// (pkg/controllers/disruption/events/events.go@v1.14.0).
const PoolBlockedDedupe = time.Minute

// budgetBlocked emits, as Karpenter's BuildDisruptionBudgetMapping does
// (pkg/controllers/disruption/helpers.go@v1.14.0) when a method with
// reason has candidates, a DisruptionBlocked event on each NodePool that
// has nodes and whose budgets allow no disruption for reason now ("No
// allowed disruptions for disruption reason Empty due to blocking
// budget"), at most once per PoolBlockedDedupe per NodePool and reason. A
// budget used up by nodes already leaving is no event, as in Karpenter:
// it frees itself, and kubectl karpx status shows it on each node waiting.
// zeroBudget is recordPassMetrics' set of such NodePools ("NodePool/reason"),
// whose budgets it has just computed for the gauges.
func (c *Controller) budgetBlocked(s *state, reason string, zeroBudget map[string]bool) {
	now := c.clock.Now()
	c.metricsMu.Lock()
	defer c.metricsMu.Unlock()
	if c.poolBlockedAt == nil {
		c.poolBlockedAt = map[string]time.Time{}
	}
	for key, at := range c.poolBlockedAt {
		if now.Sub(at) >= PoolBlockedDedupe {
			delete(c.poolBlockedAt, key)
		}
	}
	for name, pool := range s.pools {
		if !zeroBudget[name+"/"+reason] {
			continue
		}
		key := string(pool.UID) + "/" + name + "/" + reason
		if _, seen := c.poolBlockedAt[key]; seen {
			continue
		}
		c.poolBlockedAt[key] = now
		c.recorder.Eventf(pool, corev1.EventTypeNormal, "DisruptionBlocked", "No allowed disruptions for disruption reason %s due to blocking budget", reason)
	}
}
