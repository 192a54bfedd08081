package disruption

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	podset "github.com/karpx/karpx/autoscaler/state/pods"
	"github.com/karpx/karpx/requirements"
)

// execute starts cmd: it taints the candidates' Nodes
// karpenter.sh/disrupted:NoSchedule, checks with an uncached read that no
// pod landed on them since the decision (untainting and giving up if one
// did), then either deletes the candidates or launches the replacements
// and records them on the candidates. started is false when the check
// gave up.
func (c *Controller) execute(ctx context.Context, s *state, cmd *command) (bool, error) {
	log := logr.FromContextOrDiscard(ctx)
	var tainted []*candidate
	for _, cand := range cmd.candidates {
		if err := c.setDisruptedTaint(ctx, cand.node, true); err != nil {
			c.untaint(ctx, tainted)
			return false, err
		}
		tainted = append(tainted, cand)
	}
	for _, cand := range cmd.candidates {
		var pods corev1.PodList
		if err := c.reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": cand.node.Name}); err != nil {
			c.untaint(ctx, tainted)
			return false, fmt.Errorf("re-reading pods of Node %s: %w", cand.node.Name, err)
		}
		now := 0
		for i := range pods.Items {
			if podset.Reschedulable(&pods.Items[i]) {
				now++
			}
		}
		if now != len(cand.pods) {
			log.Info("pods changed on a disruption candidate since the decision; not disrupting", "NodeClaim", cand.name(),
				"NodePool", cand.pool.Name, "method", cmd.method, "podsThen", len(cand.pods), "podsNow", now)
			c.untaint(ctx, tainted)
			return false, nil
		}
	}
	decisionsTotal.WithLabelValues(cmd.method, cmd.reason, cmd.decision()).Inc()
	if ct, voluntary := consolidationTypes[cmd.method]; voluntary {
		pools := make([]string, 0, len(cmd.candidates))
		for _, cand := range cmd.candidates {
			pools = append(pools, cand.pool.Name)
		}
		karpentermetrics.DisruptionDecided(cmd.decision(), cmd.reason, ct, pools)
	}
	if len(cmd.replacements) == 0 {
		var errs []error
		for _, cand := range cmd.candidates {
			c.announce(ctx, cmd, cand, "")
			if err := c.kube.Delete(ctx, cand.nc); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting NodeClaim %s: %w", cand.name(), err))
			} else {
				karpentermetrics.NodeClaimDisrupted(cand.nc, disruptedReason(cand.nc, cmd.reason))
			}
		}
		return true, errors.Join(errs...)
	}
	var names []string
	for _, plan := range cmd.replacements {
		nc := plan.NodeClaim()
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, ReplacementForAnnotationKey, candidateNames(cmd.candidates))
		if err := c.kube.Create(ctx, nc); err != nil {
			c.untaint(ctx, tainted)
			return false, fmt.Errorf("creating replacement NodeClaim for %s: %w", cmd, err)
		}
		names = append(names, nc.Name)
		c.recorder.Event(nc, corev1.EventTypeNormal, "DisruptionLaunching", "Launching NodeClaim: "+titleReason(cmd.reason))
		karpentermetrics.NodeClaimCreated(nc, cmd.reason)
		log.Info("created replacement NodeClaim", "NodeClaim", nc.Name, "NodePool", plan.NodePool.Name,
			"replaces", candidateNames(cmd.candidates), "method", cmd.method, "cheapest", plan.InstanceTypes[0].Name, "priceUSDPerHour", plan.PriceUSDPerHour)
	}
	for _, cand := range cmd.candidates {
		stored := cand.nc.DeepCopy()
		metav1.SetMetaDataAnnotation(&cand.nc.ObjectMeta, ReplacementsAnnotationKey, strings.Join(names, ","))
		metav1.SetMetaDataAnnotation(&cand.nc.ObjectMeta, ReasonAnnotationKey, cmd.reason)
		if err := c.kube.Patch(ctx, cand.nc, client.MergeFrom(stored)); err != nil {
			return true, fmt.Errorf("recording replacements on NodeClaim %s: %w", cand.name(), err)
		}
		c.announce(ctx, cmd, cand, strings.Join(names, ","))
	}
	return true, nil
}

// announce logs the decision and records it as events (on the NodeClaim
// DisruptionTerminating or DisruptionLaunching, as Karpenter names them; on
// the Node Disrupting) and as the NodeClaim's DisruptionReason condition.
func (c *Controller) announce(ctx context.Context, cmd *command, cand *candidate, replacements string) {
	what := "deleting"
	if replacements != "" {
		what = "replacing with " + replacements + " first"
	}
	msg := fmt.Sprintf("Disrupting by %s (reason %s, %s): %s", cmd.method, cmd.reason, what, cmd.message)
	logr.FromContextOrDiscard(ctx).Info("disrupting", "NodeClaim", cand.name(), "NodePool", cand.pool.Name, "Node", cand.node.Name,
		"method", cmd.method, "reason", cmd.reason, "decision", cmd.decision(), "replacements", replacements, "detail", cmd.message)
	// karpx's Disrupting event on the Node carries the decision's detail;
	// Karpenter's own events (disruptionTerminating, launching,
	// waitingOnReadiness) go where and when Karpenter emits them.
	c.recorder.Event(cand.node, corev1.EventTypeNormal, "Disrupting", msg)
	if replacements == "" {
		c.disruptionTerminating(cand.node, cand.nc, cmd.reason)
	}
	stored := cand.nc.DeepCopy()
	cand.nc.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDisruptionReason, cmd.reason, msg)
	if err := c.kube.Status().Patch(ctx, cand.nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "recording the disruption reason", "NodeClaim", cand.name())
	}
}

// progress moves replacement-first commands along: once every replacement
// is Initialized the replaced NodeClaim is deleted (an interrupted one
// also when a replacement failed or its drain deadline came; see
// interruptionProgress); when a replacement is
// gone (ICE, registration timeout, deleted by hand) or not Initialized
// within ReplacementTimeout, the command is abandoned: the remaining
// replacements are deleted and the old Node untainted, so nothing healthy
// is lost.
//
// A consolidation (Underutilized) command's node is drained only while no
// pod is moving between nodes (see moving; for at most ReplacementTimeout
// after its last replacement became Initialized, so that a steady stream
// of new pods cannot keep a launched replacement idle for good), one such
// node per pass, and only when its pods still fit on the nodes ready for
// them now (see landing). kube-scheduler puts an evicted pod where it
// scores best, and an Initialized replacement that waits for its own
// command's drain is empty: another command's pods may take it. Draining
// then would leave a pod (a host-anti-affinity one in the head-to-head)
// Pending for a new node; the command is abandoned instead, its
// replacements that took pods kept.
func (c *Controller) progress(ctx context.Context, s *state) error {
	log := logr.FromContextOrDiscard(ctx)
	var errs []error
	// In name order: one consolidation drain per pass, the same one
	// every time.
	for _, name := range slices.Sorted(maps.Keys(s.cluster.NodeClaims)) {
		nc := s.cluster.NodeClaims[name]
		reps := splitNames(nc.Annotations[ReplacementsAnnotationKey])
		if len(reps) == 0 || !nc.DeletionTimestamp.IsZero() {
			continue
		}
		ready, failed, gone := 0, "", ""
		for _, name := range reps {
			r := s.cluster.NodeClaims[name]
			switch {
			case r == nil || !r.DeletionTimestamp.IsZero():
				failed = fmt.Sprintf("replacement %s is gone", name)
				gone = failed
			case r.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue():
				ready++
			case s.now.Sub(r.CreationTimestamp.Time) > c.opts.ReplacementTimeout:
				failed = fmt.Sprintf("replacement %s not Initialized within %s", name, c.opts.ReplacementTimeout)
			default:
				c.waitingOnReadiness(r)
			}
		}
		if interrupted(nc) {
			// The drain deadline, not ReplacementTimeout, bounds the wait.
			if del, why := interruptionProgress(nc, ready, len(reps), gone, s.now); del {
				log.Info("deleting the interrupted NodeClaim", "NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey],
					"replacements", strings.Join(reps, ","), "cause", why)
				if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
					errs = append(errs, err)
				} else if err == nil {
					karpentermetrics.NodeClaimDisrupted(nc, disruptedReason(nc, ReasonInterrupted))
				}
			}
			continue
		}
		switch {
		case failed != "":
			errs = append(errs, c.abandon(ctx, s, nc, reps, failed, false))
		case ready == len(reps) && nc.Annotations[ReasonAnnotationKey] == ReasonUnderutilized:
			if s.moving != "" && s.now.Before(initializedAt(s, reps).Add(c.opts.ReplacementTimeout)) {
				log.V(1).Info("replacements initialized; the drain waits for pods to land", "NodeClaim", nc.Name,
					"NodePool", nc.Labels[karpv1.NodePoolLabelKey], "reason", s.moving)
				continue
			}
			why, err := c.landing(ctx, s, nc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if why != "" {
				errs = append(errs, c.abandon(ctx, s, nc, reps, why, true))
				continue
			}
			if err := c.deleteReplaced(ctx, s, nc, reps); err != nil {
				errs = append(errs, err)
				continue
			}
			// Its pods move now: no other drain or consolidation command
			// starts in this pass, and the next pass sees them moving.
			s.moving = fmt.Sprintf("NodeClaim %s is being drained", nc.Name)
			errs = append(errs, c.waitForDeletion(ctx, nc))
		case ready == len(reps):
			errs = append(errs, c.deleteReplaced(ctx, s, nc, reps))
		}
	}
	return errors.Join(errs...)
}

// deleteReplaced deletes nc, whose replacements reps are all Initialized,
// with Karpenter's DisruptionTerminating events and
// karpenter_nodeclaims_disrupted_total. It returns the deletion's error
// (none when nc is already gone).
func (c *Controller) deleteReplaced(ctx context.Context, s *state, nc *karpv1.NodeClaim, reps []string) error {
	logr.FromContextOrDiscard(ctx).Info("replacements initialized; deleting the replaced NodeClaim", "NodeClaim", nc.Name,
		"NodePool", nc.Labels[karpv1.NodePoolLabelKey], "replacements", strings.Join(reps, ","))
	if err := c.kube.Delete(ctx, nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if node := s.cluster.NodeOf(nc); node != nil {
		c.disruptionTerminating(node, nc, nc.Annotations[ReasonAnnotationKey])
	}
	karpentermetrics.NodeClaimDisrupted(nc, nc.Annotations[ReasonAnnotationKey])
	return nil
}

// abandon gives up the replacement-first command on nc for cause: it
// deletes the replacements reps that are still live (with keepUsed, only
// those hosting no reschedulable pod: a replacement that took pods is an
// ordinary node now, and deleting it would evict them), untaints nc's Node
// and removes the command's annotations, so the node stays and a later
// pass decides afresh. It returns the errors of those writes.
func (c *Controller) abandon(ctx context.Context, s *state, nc *karpv1.NodeClaim, reps []string, cause string, keepUsed bool) error {
	logr.FromContextOrDiscard(ctx).Info("abandoning disruption", "NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey], "cause", cause)
	c.recorder.Eventf(nc, corev1.EventTypeWarning, "DisruptionAbandoned", "%s; the node stays", cause)
	var errs []error
	for _, name := range reps {
		r := s.cluster.NodeClaims[name]
		if r == nil || !r.DeletionTimestamp.IsZero() {
			continue
		}
		if node := s.cluster.NodeOf(r); keepUsed && node != nil && len(reschedulable(s.cluster.Pods[node.Name])) > 0 {
			continue
		}
		if err := c.kube.Delete(ctx, r); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	if node := s.cluster.NodeOf(nc); node != nil {
		if _, err := c.releaseTaint(ctx, node); err != nil {
			errs = append(errs, err)
		}
	}
	stored := nc.DeepCopy()
	delete(nc.Annotations, ReplacementsAnnotationKey)
	delete(nc.Annotations, ReasonAnnotationKey)
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// setDisruptedTaint adds (on) or removes karpenter.sh/disrupted:NoSchedule
// through clusterstate.SetDisruptedTaint.
func (c *Controller) setDisruptedTaint(ctx context.Context, node *corev1.Node, on bool) error {
	return clusterstate.SetDisruptedTaint(ctx, c.kube, node, on)
}

// releaseTaint removes karpenter.sh/disrupted from node. The write carries
// node's resourceVersion (SetDisruptedTaint replaces the whole taint list),
// so it conflicts whenever the Node changed since that copy was read: its
// kubelet's status, another controller's label, this controller's own
// release of the taint that the cache does not show yet. On a conflict it
// reads the Node afresh through the uncached reader and writes once more
// (no write when the fresh copy has no such taint), so that the node takes
// pods again now rather than at the next pass (releaseOrphanedTaints). A
// Node found deleting on the fresh read keeps its taint (termination holds
// it: a draining node must take no pods), and a Node already gone is not
// an error. It reports whether it removed a taint, and returns the last
// write's or read's error.
func (c *Controller) releaseTaint(ctx context.Context, node *corev1.Node) (bool, error) {
	had := hasDisruptedTaint(node)
	err := c.setDisruptedTaint(ctx, node, false)
	if !apierrors.IsConflict(err) {
		return had && err == nil, client.IgnoreNotFound(err)
	}
	fresh := &corev1.Node{}
	if err := c.reader.Get(ctx, client.ObjectKeyFromObject(node), fresh); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !fresh.DeletionTimestamp.IsZero() || !hasDisruptedTaint(fresh) {
		return false, nil
	}
	if err := c.setDisruptedTaint(ctx, fresh, false); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// untaint releases the candidates' Nodes (releaseTaint) after a command
// that did not start, logging each failure: the next pass's
// releaseOrphanedTaints removes what is left.
func (c *Controller) untaint(ctx context.Context, cands []*candidate) {
	for _, cand := range cands {
		if _, err := c.releaseTaint(ctx, cand.node); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "removing the disrupted taint", "Node", cand.node.Name, "NodeClaim", cand.name())
		}
	}
}

// markConditions keeps each candidate's Consolidatable and Drifted
// conditions current (written only when they change).
func (c *Controller) markConditions(ctx context.Context, s *state) error {
	var errs []error
	for _, cand := range s.candidates {
		// Only the conditions are copied up front; the whole NodeClaim
		// only when they changed (a copy of every candidate per pass was
		// 12 MB of garbage at 2,000 NodeClaims; issue 12).
		before := slices.Clone(cand.nc.Status.Conditions)
		conds := cand.nc.StatusConditions()
		changed := false
		if cand.consolidatable(s.now) {
			changed = conds.SetTrue(karpv1.ConditionTypeConsolidatable) || changed
		} else if conds.Get(karpv1.ConditionTypeConsolidatable) != nil {
			changed = conds.Clear(karpv1.ConditionTypeConsolidatable) == nil || changed
		}
		reason, err := c.driftReason(ctx, s, cand)
		if err != nil {
			// Never disrupt on a guess: an unknown drift state keeps
			// whatever was recorded.
			logr.FromContextOrDiscard(ctx).V(1).Info("drift unknown", "NodeClaim", cand.name(), "error", err.Error())
		} else if reason != "" {
			changed = conds.SetTrueWithReason(karpv1.ConditionTypeDrifted, reason, reason) || changed
		} else if conds.Get(karpv1.ConditionTypeDrifted) != nil {
			changed = conds.Clear(karpv1.ConditionTypeDrifted) == nil || changed
		}
		if !changed {
			continue
		}
		stored := cand.nc.DeepCopy()
		stored.Status.Conditions = before
		if err := c.kube.Status().Patch(ctx, cand.nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("updating conditions of NodeClaim %s: %w", cand.name(), err))
		}
	}
	return errors.Join(errs...)
}

// driftReason returns why cand's NodeClaim no longer matches what its
// NodePool and EC2NodeClass would launch now, or "": the checks and order
// of Karpenter's drift controller (isDrifted,
// pkg/controllers/nodeclaim/disruption/drift.go@v1.14.0): the NodePool's
// static hash, its requirements, the instance type still offered (only
// past InstanceTypeNotFoundAfter), then the cloud provider's own.
func (c *Controller) driftReason(ctx context.Context, s *state, cand *candidate) (string, error) {
	// Karpenter compares with the hash its NodePool hash controller
	// writes on the NodePool; karpx computes it here with the same
	// NodePool.Hash of sigs.k8s.io/karpenter/pkg/apis/v1 (identical in
	// v1.13.0 and v1.14.0, NodePoolHashVersion v3 in both).
	if v := cand.nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey]; v == karpv1.NodePoolHashVersion {
		if h, ok := cand.nc.Annotations[karpv1.NodePoolHashAnnotationKey]; ok && h != cand.pool.Hash() {
			return cloudprovider.DriftReasonNodePool, nil
		}
	}
	if requirementsDrifted(cand.pool, cand.nc) {
		return cloudprovider.DriftReasonRequirements, nil
	}
	if s.now.Sub(cand.nc.CreationTimestamp.Time) > cloudprovider.InstanceTypeNotFoundAfter && instanceTypeNotFound(s.types[cand.pool.Name], cand.nc) {
		return cloudprovider.DriftReasonInstanceTypeNotFound, nil
	}
	return c.cloud.IsDrifted(ctx, cand.nc)
}

// requirementsDrifted reports whether the NodeClaim's labels no longer
// satisfy its NodePool's spec.template.spec.requirements, as Karpenter's
// areRequirementsDrifted (drift.go@v1.14.0) judges it: a requirement on a
// label the NodeClaim lacks fails unless its operator is NotIn or
// DoesNotExist; one on a label it has must admit the label's value.
func requirementsDrifted(pool *karpv1.NodePool, nc *karpv1.NodeClaim) bool {
	return !requirements.ParseNodeClaim(pool.Spec.Template.Spec.Requirements).MatchLabels(nc.Labels)
}

// instanceTypeNotFound is Karpenter's instanceTypeNotFound
// (drift.go@v1.14.0): true when the NodeClaim's
// node.kubernetes.io/instance-type is not among the NodePool's instance
// types, or the type has no offering, available or not, in the
// NodeClaim's zone and capacity type (a reserved NodeClaim also accepts
// on-demand, to which a reservation falls back). An empty list is no
// answer (the NodePool's types could not be read) and drifts nothing.
func instanceTypeNotFound(types []*cloudprovider.InstanceType, nc *karpv1.NodeClaim) bool {
	if len(types) == 0 {
		return false
	}
	name := nc.Labels[corev1.LabelInstanceTypeStable]
	i := slices.IndexFunc(types, func(it *cloudprovider.InstanceType) bool { return it.Name == name })
	if name == "" || i < 0 {
		return true
	}
	zone, zoned := nc.Labels[corev1.LabelTopologyZone]
	capacityType, typed := nc.Labels[karpv1.CapacityTypeLabelKey]
	return !slices.ContainsFunc(types[i].Offerings, func(o cloudprovider.Offering) bool {
		if zoned && o.Zone != zone {
			return false
		}
		if !typed || o.CapacityType == capacityType {
			return true
		}
		return capacityType == karpv1.CapacityTypeReserved && o.CapacityType == karpv1.CapacityTypeOnDemand
	})
}

// titleReason is a disruption reason as Karpenter's events print it
// (cases.Title with NoLower: each word's first letter upper-cased, the
// rest kept): "Underutilized", "Drifted", "Empty".
func titleReason(reason string) string {
	words := strings.Split(reason, " ")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

// disruptionTerminating emits Karpenter's DisruptionTerminating events
// when a disrupted NodeClaim is deleted: "Disrupting Node: <Reason>" on
// the Node and "Disrupting NodeClaim: <Reason>" on the NodeClaim
// (Terminating, pkg/controllers/disruption/events/events.go@v1.14.0).
func (c *Controller) disruptionTerminating(node *corev1.Node, nc *karpv1.NodeClaim, reason string) {
	c.recorder.Event(node, corev1.EventTypeNormal, "DisruptionTerminating", "Disrupting Node: "+titleReason(reason))
	c.recorder.Event(nc, corev1.EventTypeNormal, "DisruptionTerminating", "Disrupting NodeClaim: "+titleReason(reason))
}

// waitingOnReadiness emits, once per blockedEventTTL per replacement,
// Karpenter's DisruptionWaitingReadiness "Waiting on readiness to continue
// disruption" on a replacement NodeClaim not yet Initialized
// (WaitingOnReadiness, events.go@v1.14.0).
func (c *Controller) waitingOnReadiness(nc *karpv1.NodeClaim) {
	key := "waiting\x00" + string(nc.UID) + "\x00" + nc.Name
	if _, seen := blockedSeen.Get(key); seen {
		return
	}
	blockedSeen.Add(key, struct{}{})
	c.recorder.Event(nc, corev1.EventTypeNormal, "DisruptionWaitingReadiness", "Waiting on readiness to continue disruption")
}

// unconsolidatable tells, once per blockedEventTTL per NodeClaim and
// message, why consolidation leaves a node: Normal events with
// Karpenter's reason Unconsolidatable on the Node and the NodeClaim
// (pkg/controllers/disruption/events/events.go@v1.14.0).
func (c *Controller) unconsolidatable(cand *candidate, msg string) {
	key := "unconsolidatable\x00" + string(cand.nc.UID) + "\x00" + cand.name() + "\x00" + msg
	if _, seen := blockedSeen.Get(key); seen {
		return
	}
	blockedSeen.Add(key, struct{}{})
	c.recorder.Event(cand.node, corev1.EventTypeNormal, "Unconsolidatable", msg)
	c.recorder.Event(cand.nc, corev1.EventTypeNormal, "Unconsolidatable", msg)
}

// invalidDoNotDisrupt tells, once per blockedEventTTL per pod and message,
// that the pod's karpenter.sh/do-not-disrupt value is ignored: a Warning
// event with Karpenter's reason InvalidDoNotDisruptAnnotation
// (pkg/utils/pod/events.go@v1.14.0).
func (c *Controller) invalidDoNotDisrupt(pod *corev1.Pod, err error) {
	key := string(pod.UID) + "\x00" + err.Error()
	if _, seen := blockedSeen.Get(key); seen {
		return
	}
	blockedSeen.Add(key, struct{}{})
	c.recorder.Event(pod, corev1.EventTypeWarning, "InvalidDoNotDisruptAnnotation", err.Error())
}

// blockedEvent tells, at most once per blockedEventTTL per NodeClaim and
// message, why a node that a method would disrupt waits.
func (c *Controller) blockedEvent(cand *candidate, msg string) {
	key := cand.name() + "\x00" + msg
	if _, seen := blockedSeen.Get(key); seen {
		return
	}
	blockedSeen.Add(key, struct{}{})
	c.recorder.Event(cand.nc, corev1.EventTypeNormal, "DisruptionBlocked", msg)
	c.recorder.Event(cand.node, corev1.EventTypeNormal, "DisruptionBlocked", msg)
}

// blockedEventTTL is how long an identical DisruptionBlocked event is not
// repeated; the event recorder's own aggregation counts repeats beyond it.
const blockedEventTTL = 5 * time.Minute

func candidateNames(cands []*candidate) string {
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.name()
	}
	return strings.Join(names, ",")
}
