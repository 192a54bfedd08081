package disruption_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/karpentermetrics"
)

// TestPassRecordsKarpenterDisruptionMetrics: a pass over five empty nodes
// of a NodePool whose budget allows 2 sets Karpenter's budget gauges
// (allowed 2 for every reason, none consuming before the pass acts),
// counts 5 empty candidates as eligible, and counts one emptiness command
// (decision delete, reason empty, consolidation_type empty) under both
// decision families; the next pass counts the two NodeClaims being
// deleted (held by their termination finalizer) as consuming the budget.
func TestPassRecordsKarpenterDisruptionMetrics(t *testing.T) {
	pool := "metrics-pool"
	decisions := karpentermetrics.VoluntaryDisruptionDecisionsTotal.WithLabelValues("delete", "empty", "empty")
	byPool := karpentermetrics.VoluntaryDisruptionDecisionsByNodePoolTotal.WithLabelValues(pool, "delete", "empty", "empty")
	before, beforePool := testutil.ToFloat64(decisions), testutil.ToFloat64(byPool)

	c := newCluster(t)
	c.pool(pool, karpv1.ConsolidationPolicyWhenEmpty, 0, "2")
	for i := 0; i < 5; i++ {
		c.node(fmt.Sprintf("m%d", i), pool, time.Hour, nil)
	}
	for _, o := range c.objs {
		if nc, ok := o.(*karpv1.NodeClaim); ok {
			nc.Finalizers = []string{karpv1.TerminationFinalizer}
		}
	}
	res := c.pass()
	if len(res.Decisions) != 1 {
		t.Fatalf("decisions %v, want one emptiness command", res.Decisions)
	}
	for _, reason := range []string{"Drifted", "Empty", "Underutilized"} {
		if got := testutil.ToFloat64(karpentermetrics.NodePoolAllowedDisruptions.WithLabelValues(pool, reason)); got != 2 {
			t.Errorf("karpenter_nodepools_allowed_disruptions{nodepool=%q,reason=%q} = %v, want 2", pool, reason, got)
		}
		if got := testutil.ToFloat64(karpentermetrics.NodePoolNodesConsumingBudgets.WithLabelValues(pool, reason)); got != 0 {
			t.Errorf("karpenter_nodepools_nodes_consuming_budgets{nodepool=%q,reason=%q} = %v, want 0", pool, reason, got)
		}
	}
	if got := testutil.ToFloat64(karpentermetrics.VoluntaryDisruptionEligibleNodes.WithLabelValues("empty")); got != 5 {
		t.Errorf("karpenter_voluntary_disruption_eligible_nodes{reason=empty} = %v, want 5", got)
	}
	if got := testutil.ToFloat64(decisions) - before; got != 1 {
		t.Errorf("karpenter_voluntary_disruption_decisions_total{decision=delete,reason=empty,consolidation_type=empty} rose by %v, want 1", got)
	}
	if got := testutil.ToFloat64(byPool) - beforePool; got != 1 {
		t.Errorf("karpenter_voluntary_disruption_decisions_by_nodepool_total{nodepool=%q,...} rose by %v, want 1", pool, got)
	}

	// The second pass sees the two deletions consuming the budget.
	c.pass()
	if got := testutil.ToFloat64(karpentermetrics.NodePoolNodesConsumingBudgets.WithLabelValues(pool, "Empty")); got != 2 {
		t.Errorf("after the deletions karpenter_nodepools_nodes_consuming_budgets{reason=Empty} = %v, want 2", got)
	}
}
