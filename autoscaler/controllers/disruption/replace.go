package disruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/karpentermetrics"
)

// drift replaces the first drifted candidate its Drifted budget allows.
func (c *Controller) drift(ctx context.Context, s *state) (*command, error) {
	return c.replaceFirst(ctx, s, MethodDrift, ReasonDrifted, func(cand *candidate) string {
		if cond := cand.nc.StatusConditions().Get(karpv1.ConditionTypeDrifted); cond != nil && cond.IsTrue() {
			return cond.Reason
		}
		return ""
	})
}

// expire deletes every NodeClaim older than its spec.expireAfter, as
// Karpenter v1's expiration controller does
// (pkg/controllers/nodeclaim/expiration/controller.go@v1.14.0):
// forcefully, whether Initialized or not, with no disruption budget,
// karpenter.sh/do-not-disrupt, PodDisruptionBudget or replacement first
// consulted; the termination controller then drains the node, bounded by
// the NodeClaim's spec.terminationGracePeriod, and the provisioner
// launches capacity for the evicted pods. It returns the earliest expiry
// still to come (zero when none), for the pass to wake at.
func (c *Controller) expire(ctx context.Context, s *state) (time.Time, error) {
	var next time.Time
	var errs []error
	for _, nc := range s.cluster.NodeClaims {
		d := nc.Spec.ExpireAfter.Duration
		if d == nil || !nc.DeletionTimestamp.IsZero() {
			continue
		}
		at := nc.CreationTimestamp.Add(*d)
		if s.now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		if err := c.kube.Delete(ctx, nc); err != nil {
			if client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting expired NodeClaim %s: %w", nc.Name, err))
			}
			continue
		}
		logr.FromContextOrDiscard(ctx).Info("deleted expired NodeClaim", "NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey],
			"expireAfter", d.String(), "created", nc.CreationTimestamp.UTC().Format(time.RFC3339))
		decisionsTotal.WithLabelValues(MethodExpiration, ReasonExpired, DecisionDelete).Inc()
		karpentermetrics.NodeClaimDisrupted(nc, ReasonExpired)
	}
	return next, errors.Join(errs...)
}

// replaceFirst builds a command for the first candidate why accepts: its
// pods go to other nodes or to new NodeClaims launched first.
func (c *Controller) replaceFirst(_ context.Context, s *state, method, reason string, why func(*candidate) string) (*command, error) {
	for _, cand := range s.candidates {
		cause := why(cand)
		if cause == "" {
			continue
		}
		if block := cand.eventualBlock(); block != "" {
			c.blockedEvent(cand, fmt.Sprintf("%s (%s) waits: %s", reason, cause, block))
			continue
		}
		if c.allowed(s, cand.pool, reason) < 1 {
			continue // a budget of zero is the NodePool's event (budgetBlocked)
		}
		cmd := &command{method: method, reason: reason, candidates: []*candidate{cand}, message: cause}
		if len(cand.pods) > 0 {
			if cand.unmodelled != "" {
				c.blockedEvent(cand, fmt.Sprintf("%s (%s) waits: %s", reason, cause, cand.unmodelled))
				continue
			}
			res, ok := c.simulate(s, cmd.candidates)
			if !ok {
				c.blockedEvent(cand, fmt.Sprintf("%s (%s) waits: its pods would not fit on any node karpx can launch", reason, cause))
				continue
			}
			cmd.replacements = holdingMoved(res.NewNodeClaims, cmd.candidates)
		}
		return cmd, nil
	}
	return nil, nil
}
