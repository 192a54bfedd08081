package disruption

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/scheduling/volumetopology"
)

// MethodInterruption and ReasonInterrupted name interruption commands in
// events, the DisruptionReason condition and
// karpx_disruption_decisions_total.
const (
	MethodInterruption = "interruption"
	ReasonInterrupted  = "Interrupted"
)

// interrupted reports whether nc carries the interruption annotation.
func interrupted(nc *karpv1.NodeClaim) bool {
	return nc.Annotations[cloudprovider.InterruptionAnnotationKey] != ""
}

// disruptedReason is the reason label of karpenter_nodeclaims_disrupted_total
// for deleting nc by a command of reason: an interrupted NodeClaim's
// interruption kind (spot_interrupted, scheduled_change, instance_stopped,
// ...), as Karpenter v1.13's AWS interruption controller counts its
// deletions (reason = the message kind), else reason.
func disruptedReason(nc *karpv1.NodeClaim, reason string) string {
	if kind := nc.Annotations[cloudprovider.InterruptionAnnotationKey]; kind != "" {
		return kind
	}
	return reason
}

// drainBy returns the NodeClaim's drain deadline, or the zero time.
func drainBy(nc *karpv1.NodeClaim) time.Time {
	t, err := time.Parse(time.RFC3339, nc.Annotations[cloudprovider.InterruptionDrainByAnnotationKey])
	if err != nil {
		return time.Time{}
	}
	return t
}

// interruption builds one command for every interrupted NodeClaim that is
// neither being deleted nor already replacing: their pods go to the other
// nodes or to NodeClaims launched first, planned by the same simulation as
// consolidation with every interrupted node left out. Interruption is
// forced, as in Karpenter: no disruption budget, do-not-disrupt annotation
// or unmodelled pod holds it (PodDisruptionBudgets still pace the drain),
// and pods that fit nowhere do not stop the others' replacements. A
// NodeClaim without an Initialized Node has no pods to move and is
// deleted at once.
func (c *Controller) interruption(ctx context.Context, s *state) (*command, error) {
	var names []string
	for name, nc := range s.cluster.NodeClaims {
		if interrupted(nc) && nc.DeletionTimestamp.IsZero() && nc.Annotations[ReplacementsAnnotationKey] == "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	sort.Strings(names)
	log := logr.FromContextOrDiscard(ctx)
	cmd := &command{method: MethodInterruption, reason: ReasonInterrupted}
	var errs []error
	for _, name := range names {
		nc := s.cluster.NodeClaims[name]
		pool, types := s.pools[nc.Labels[karpv1.NodePoolLabelKey]], s.types[nc.Labels[karpv1.NodePoolLabelKey]]
		node := s.cluster.NodeOf(nc)
		if node == nil || pool == nil || types == nil || !node.DeletionTimestamp.IsZero() ||
			!nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			log.Info("interrupted NodeClaim has no pods to move first; deleting it", "NodeClaim", name,
				"NodePool", nc.Labels[karpv1.NodePoolLabelKey], "interruption", nc.Annotations[cloudprovider.InterruptionAnnotationKey])
			if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting interrupted NodeClaim %s: %w", name, err))
			} else if err == nil {
				karpentermetrics.NodeClaimDisrupted(nc, disruptedReason(nc, ReasonInterrupted))
			}
			continue
		}
		cand := &candidate{nc: nc, node: node, pool: pool, pods: reschedulable(s.cluster.Pods[node.Name]), price: priceOf(types, node.Labels)}
		for _, p := range cand.pods {
			if _, ok := s.volumes[p.UID]; ok {
				continue
			}
			if reqs, err := volumetopology.Requirements(ctx, c.kube, p); err == nil && len(reqs) > 0 {
				s.volumes[p.UID] = reqs
			}
		}
		cmd.candidates = append(cmd.candidates, cand)
	}
	if len(cmd.candidates) == 0 {
		return nil, errors.Join(errs...)
	}
	res, ok := c.simulate(s, cmd.candidates)
	cmd.replacements = holdingMoved(res.NewNodeClaims, cmd.candidates)
	kinds := map[string]bool{}
	for _, cand := range cmd.candidates {
		kinds[cand.nc.Annotations[cloudprovider.InterruptionAnnotationKey]] = true
	}
	var kindList []string
	for k := range kinds {
		kindList = append(kindList, k)
	}
	sort.Strings(kindList)
	cmd.message = fmt.Sprintf("EC2 interruption (%s)", strings.Join(kindList, ","))
	if !ok {
		cmd.message += "; some pods fit on no node karpx can launch and will stay pending"
	}
	return cmd, errors.Join(errs...)
}

// interruptionProgress decides what happens to an interrupted NodeClaim
// whose replacements are under way: it is deleted (drained through package
// termination) once they are all Initialized, when one of them failed
// (the instance goes away anyway: abandoning would lose the pods), or
// when its drain deadline has come.
func interruptionProgress(nc *karpv1.NodeClaim, ready, total int, failed string, now time.Time) (del bool, why string) {
	switch {
	case ready == total:
		return true, "replacements initialized"
	case failed != "":
		return true, failed + "; draining anyway before EC2 reclaims the instance"
	case !drainBy(nc).IsZero() && !now.Before(drainBy(nc)):
		return true, "drain deadline " + nc.Annotations[cloudprovider.InterruptionDrainByAnnotationKey] + " reached before the replacements initialized"
	}
	return false, ""
}
