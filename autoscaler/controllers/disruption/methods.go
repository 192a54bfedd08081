package disruption

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/scheduling"
	podset "github.com/karpx/karpx/autoscaler/state/pods"
	"github.com/karpx/karpx/requirements"
)

// Methods, as they appear in events and metrics.
const (
	MethodExpiration    = "expiration"
	MethodDrift         = "drift"
	MethodEmptiness     = "emptiness"
	MethodMultiNode     = "multi-node-consolidation"
	MethodSingleNode    = "single-node-consolidation"
	DecisionDelete      = "delete"
	DecisionReplace     = "replace"
	maxBinarySearchStep = 100
)

// command is one disruption decision: the candidates to remove and the
// NodeClaims to launch first (none for a plain delete).
type command struct {
	method, reason string
	candidates     []*candidate
	replacements   []scheduling.NodeClaimPlan
	// message explains the decision in events (savings, drift cause, …).
	message string
}

func (c *command) decision() string {
	if len(c.replacements) > 0 {
		return DecisionReplace
	}
	return DecisionDelete
}

func (c *command) String() string {
	names := make([]string, len(c.candidates))
	for i, cand := range c.candidates {
		names[i] = cand.name()
	}
	return fmt.Sprintf("%s/%s: %s", c.method, c.decision(), strings.Join(names, ","))
}

// emptiness deletes consolidatable nodes with no reschedulable pods in
// NodePools whose consolidationPolicy is WhenEmpty or
// WhenEmptyOrUnderutilized, as many per NodePool as its Empty budget allows.
func (c *Controller) emptiness(_ context.Context, s *state) (*command, error) {
	cmd := &command{method: MethodEmptiness, reason: ReasonEmpty, message: "node has no pods to reschedule"}
	taken := map[string]int{}
	for _, cand := range s.candidates {
		if len(cand.pods) > 0 || cand.blocked != "" || !cand.consolidatable(s.now) {
			continue
		}
		if taken[cand.pool.Name] >= c.allowed(s, cand.pool, ReasonEmpty) {
			continue // a budget of zero is the NodePool's event (budgetBlocked)
		}
		taken[cand.pool.Name]++
		cmd.candidates = append(cmd.candidates, cand)
	}
	if len(cmd.candidates) == 0 {
		return nil, nil
	}
	return cmd, nil
}

// consolidationCandidates returns the candidates of WhenEmptyOrUnderutilized
// NodePools that consolidation may move, cheapest to disrupt first (fewest
// pods, then most expensive).
func (c *Controller) consolidationCandidates(s *state) []*candidate {
	var out []*candidate
	for _, cand := range s.candidates {
		if cand.pool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized ||
			cand.blocked != "" || !cand.consolidatable(s.now) || len(cand.pods) == 0 || cand.price == 0 {
			continue
		}
		if cand.unmodelled != "" {
			c.blockedEvent(cand, "not consolidated: "+cand.unmodelled+" (karpx never moves pods on a guess)")
			continue
		}
		out = append(out, cand)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].pods) != len(out[j].pods) {
			return len(out[i].pods) < len(out[j].pods)
		}
		return out[i].price > out[j].price
	})
	return out
}

// singleNodeConsolidation finds the first candidate whose pods all fit on
// other nodes (delete) or on other nodes plus one cheaper new node
// (replace).
func (c *Controller) singleNodeConsolidation(ctx context.Context, s *state) (*command, error) {
	if held(ctx, s) {
		return nil, nil
	}
	for _, cand := range c.consolidationCandidates(s) {
		if c.allowed(s, cand.pool, ReasonUnderutilized) < 1 {
			continue
		}
		if cmd := c.consolidate(ctx, s, MethodSingleNode, []*candidate{cand}); cmd != nil {
			return cmd, nil
		}
	}
	return nil, nil
}

// multiNodeConsolidation finds the largest prefix (at least two) of the
// candidates, within budgets, that can be replaced by at most one cheaper
// node, by binary search as Karpenter does.
func (c *Controller) multiNodeConsolidation(ctx context.Context, s *state) (*command, error) {
	if held(ctx, s) {
		return nil, nil
	}
	var cands []*candidate
	taken := map[string]int{}
	for _, cand := range c.consolidationCandidates(s) {
		if taken[cand.pool.Name] >= c.allowed(s, cand.pool, ReasonUnderutilized) {
			continue
		}
		taken[cand.pool.Name]++
		cands = append(cands, cand)
		if len(cands) == c.opts.MaxMultiNodeCandidates {
			break
		}
	}
	if len(cands) < 2 {
		return nil, nil
	}
	var best *command
	lo, hi := 2, len(cands)
	for lo <= hi {
		mid := (lo + hi) / 2
		if cmd := c.consolidate(ctx, s, MethodMultiNode, cands[:mid]); cmd != nil {
			best, lo = cmd, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best, nil
}

// held reports whether consolidation waits this pass because a pod is
// moving between nodes (see moving), and logs which one.
func held(ctx context.Context, s *state) bool {
	if s.moving == "" {
		return false
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("consolidation waits for pods to land", "reason", s.moving)
	return true
}

// consolidate simulates removing cands and returns the command when it
// saves money: all their pods fit on the remaining nodes with every
// pending pod still placed as before (no new node at all: delete), or
// they and the pending pods need one new node cheaper than cands together
// (replace). nil otherwise. As in Karpenter, a new node a pending pod needs
// counts: deleting a node whose room pending pods need would only move
// the launch to the provisioner.
func (c *Controller) consolidate(_ context.Context, s *state, method string, cands []*candidate) *command {
	res, ok := c.simulate(s, cands)
	if !ok || len(res.NewNodeClaims) > 1 {
		return nil
	}
	var price float64
	for _, cand := range cands {
		price += cand.price
	}
	cmd := &command{method: method, reason: ReasonUnderutilized, candidates: cands}
	if len(res.NewNodeClaims) == 0 {
		cmd.message = fmt.Sprintf("pods fit on other nodes; saves $%.4f/h", price)
		return cmd
	}
	plan := res.NewNodeClaims[0]
	if len(cands) > 1 {
		// Replacing several nodes with a node of a type one of them runs
		// is deleting the others with an extra launch: a delete-only
		// command does that better, so such types are not replacements.
		plan = withoutTypes(plan, cands)
	}
	if allSpot(cands) && requirements.ParseNodeClaim(plan.Requirements).Allows(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot) {
		if plan, ok = c.spotToSpot(cands, plan, price); !ok {
			return nil
		}
	} else if plan, ok = cheaper(plan, price); !ok {
		return nil
	}
	cmd.replacements = []scheduling.NodeClaimPlan{plan}
	cmd.message = fmt.Sprintf("replaced by one %s node; $%.4f/h instead of $%.4f/h", plan.InstanceTypes[0].Name, plan.PriceUSDPerHour, price)
	return cmd
}

// MinInstanceTypesForSpotToSpot is how many cheaper spot instance types a
// single-node spot-to-spot consolidation needs, and how many the
// replacement may launch from: Karpenter's
// MinInstanceTypesForSpotToSpotConsolidation
// (pkg/controllers/disruption/consolidation.go@v1.14.0).
const MinInstanceTypesForSpotToSpot = 15

// allSpot reports whether every candidate's node is spot.
func allSpot(cands []*candidate) bool {
	for _, cand := range cands {
		if cand.node.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot {
			return false
		}
	}
	return true
}

// spotToSpot narrows the replacement of spot candidates to spot, as
// Karpenter's computeSpotToSpotConsolidation
// (pkg/controllers/disruption/consolidation.go@v1.14.0): not at all
// without the SpotToSpotConsolidation gate; the replacement's capacity
// type spot and its types those cheaper than the candidates; for one
// candidate at least MinInstanceTypesForSpotToSpot of them, of which the
// MinInstanceTypesForSpotToSpot cheapest are launched from (or as many as
// the largest minValues of the plan's requirements), so that the new spot
// node is never itself replaced at once by a cheaper one. ok is false when
// no command may be made; a single candidate then gets an Unconsolidatable
// event with Karpenter's message.
func (c *Controller) spotToSpot(cands []*candidate, plan scheduling.NodeClaimPlan, price float64) (scheduling.NodeClaimPlan, bool) {
	why := func(msg string) (scheduling.NodeClaimPlan, bool) {
		if len(cands) == 1 {
			c.unconsolidatable(cands[0], msg)
		}
		return plan, false
	}
	if !c.opts.SpotToSpotConsolidation {
		return why("SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node")
	}
	spot := plan
	spot.Requirements = make([]karpv1.NodeSelectorRequirementWithMinValues, 0, len(plan.Requirements)+1)
	for _, r := range plan.Requirements {
		if r.Key != karpv1.CapacityTypeLabelKey {
			spot.Requirements = append(spot.Requirements, *r.DeepCopy())
		}
	}
	spot.Requirements = append(spot.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
		Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot}})
	spot, ok := cheaper(spot, price)
	if !ok {
		return why("Can't replace with a cheaper node")
	}
	spot = byPrice(spot)
	if len(cands) > 1 {
		return spot, true
	}
	if n := len(spot.InstanceTypes); n < MinInstanceTypesForSpotToSpot {
		return why(fmt.Sprintf("SpotToSpotConsolidation requires %d cheaper instance type options than the current candidate to consolidate, got %d",
			MinInstanceTypesForSpotToSpot, n))
	}
	limit := MinInstanceTypesForSpotToSpot
	for _, r := range spot.Requirements {
		if r.MinValues != nil && *r.MinValues > limit {
			limit = *r.MinValues
		}
	}
	return firstTypes(spot, limit), true
}

// byPrice orders plan's instance types by the price of the cheapest
// offering the plan allows (Karpenter's OrderByPrice), sets its price to
// the first one's and its instance-type requirement to the new order.
func byPrice(plan scheduling.NodeClaimPlan) scheduling.NodeClaimPlan {
	ok := plan.AllowsOffering()
	price := func(it *cloudprovider.InstanceType) float64 {
		o, _ := it.CheapestOffering(ok)
		return o.PriceUSDPerHour
	}
	types := slices.Clone(plan.InstanceTypes)
	slices.SortStableFunc(types, func(a, b *cloudprovider.InstanceType) int { return cmp.Compare(price(a), price(b)) })
	plan.InstanceTypes = types
	plan.PriceUSDPerHour = price(types[0])
	plan.Requirements = slices.Clone(plan.Requirements)
	return firstTypes(plan, len(types))
}

// firstTypes keeps the first n of plan's instance types (cheapest first,
// as cheaper orders them) and narrows its instance-type requirement to
// them.
func firstTypes(plan scheduling.NodeClaimPlan, n int) scheduling.NodeClaimPlan {
	plan.InstanceTypes = plan.InstanceTypes[:min(n, len(plan.InstanceTypes))]
	names := make([]string, 0, n)
	for _, it := range plan.InstanceTypes {
		names = append(names, it.Name)
	}
	reqs := make([]karpv1.NodeSelectorRequirementWithMinValues, len(plan.Requirements))
	for i := range plan.Requirements {
		plan.Requirements[i].DeepCopyInto(&reqs[i])
		if reqs[i].Key == corev1.LabelInstanceTypeStable && reqs[i].Operator == corev1.NodeSelectorOpIn {
			reqs[i].Values = names
		}
	}
	plan.Requirements = reqs
	return plan
}

// simulate runs the scheduler on the pods of cands as if their nodes were
// gone, together with every pod still pending and every pod still bound to
// a node that is leaving (leaving), as Karpenter's SimulateScheduling does
// with its deleting nodes' pods (pkg/controllers/disruption/helpers.go@v1.14.0).
// Without the leaving pods, the room an earlier command's pods are about
// to take looked free: the next command moved its own pods into it, or
// deleted as empty the node they were headed for, and the pods evicted
// last found no room and waited Pending for a new node. The scheduler packs them all in one order
// (largest first, then by name), so a moved pod may take room on another
// node that a pending pod was to take (a node that has just initialised
// for pods kube-scheduler has not bound yet); that pending pod then needs
// a new node in the result, which is why the result keeps the new
// NodeClaims of pending pods too: a command that needs any new node is no
// plain delete. ok is false when a moved pod would not fit anywhere
// (pending pods that fit nowhere do not count: they fit nowhere without
// the command either). Interrupted nodes are never a destination.
func (c *Controller) simulate(s *state, cands []*candidate) (scheduling.Result, bool) {
	excluded := map[string]bool{}
	moved := map[types.UID]bool{}
	var pods []*corev1.Pod
	for _, cand := range cands {
		excluded[cand.nc.Name] = true
		for _, p := range cand.pods {
			moved[p.UID] = true
			p = p.DeepCopy()
			p.Spec.NodeName = ""
			pods = append(pods, p)
		}
	}
	pods = append(pods, leaving(s)...)
	for _, p := range s.cluster.Unbound {
		if podset.Reschedulable(p) {
			pods = append(pods, p)
		}
	}
	// Interrupted nodes are going away: nothing moves onto them.
	in := scheduling.Input{
		Pods:               pods,
		NodePools:          s.poolInputs,
		DaemonSetPods:      s.daemonSets,
		ExistingNodes:      s.cluster.ExistingNodes(s.types, func(nc *karpv1.NodeClaim) bool { return excluded[nc.Name] || interrupted(nc) }),
		VolumeRequirements: s.volumes,
		MinValuesPolicy:    c.opts.MinValuesPolicy,
		NamespaceLabels:    s.namespaces,
	}
	solveStart := c.clock.Now()
	res := scheduling.Solve(in)
	karpentermetrics.ObserveScheduling(karpentermetrics.ControllerDisruption, c.clock.Since(solveStart))
	ok := true
	for uid := range res.Unschedulable {
		if moved[uid] {
			ok = false
		}
	}
	return res, ok
}

// leaving returns copies, unbound, of the reschedulable pods still bound
// to a Node that is going away: the Node or its NodeClaim is being deleted,
// or the Node carries karpenter.sh/disrupted (a command drains it or
// waits for its replacements). Their nodes are no destination
// (clusterstate.Snapshot.ExistingNodes), so these pods need room
// elsewhere, which no later decision may give away.
func leaving(s *state) []*corev1.Pod {
	var out []*corev1.Pod
	for _, name := range slices.Sorted(maps.Keys(s.cluster.Pods)) {
		node := s.cluster.Nodes[name]
		if node == nil {
			continue
		}
		if !s.draining(name) && !hasDisruptedTaint(node) {
			continue
		}
		for _, p := range s.cluster.Pods[name] {
			if podset.Reschedulable(p) {
				p = p.DeepCopy()
				p.Spec.NodeName = ""
				out = append(out, p)
			}
		}
	}
	return out
}

// holdingMoved returns the plans that hold a pod of cands: the
// replacements a drift, expiry or interruption command launches first
// (the provisioner launches nodes for pending pods).
func holdingMoved(plans []scheduling.NodeClaimPlan, cands []*candidate) []scheduling.NodeClaimPlan {
	moved := map[types.UID]bool{}
	for _, cand := range cands {
		for _, p := range cand.pods {
			moved[p.UID] = true
		}
	}
	var out []scheduling.NodeClaimPlan
	for _, plan := range plans {
		for _, p := range plan.Pods {
			if moved[p.UID] {
				out = append(out, plan)
				break
			}
		}
	}
	return out
}

// cheaper narrows plan to the instance types whose cheapest offering the
// plan allows costs less than maxPrice (USD/h). ok is false when none does.
func cheaper(plan scheduling.NodeClaimPlan, maxPrice float64) (scheduling.NodeClaimPlan, bool) {
	ok := plan.AllowsOffering()
	var kept []*cloudprovider.InstanceType
	var names []string
	best := 0.0
	for _, it := range plan.InstanceTypes {
		if o, found := it.CheapestOffering(ok); found && o.PriceUSDPerHour < maxPrice {
			if len(kept) == 0 {
				best = o.PriceUSDPerHour
			}
			kept = append(kept, it)
			names = append(names, it.Name)
		}
	}
	if len(kept) == 0 {
		return plan, false
	}
	out := plan
	out.InstanceTypes = kept
	out.PriceUSDPerHour = best
	out.Requirements = make([]karpv1.NodeSelectorRequirementWithMinValues, len(plan.Requirements))
	for i := range plan.Requirements {
		plan.Requirements[i].DeepCopyInto(&out.Requirements[i])
		if out.Requirements[i].Key == corev1.LabelInstanceTypeStable && out.Requirements[i].Operator == corev1.NodeSelectorOpIn {
			out.Requirements[i].Values = names
		}
	}
	return out, true
}

// withoutTypes drops from plan the instance types the candidates run.
func withoutTypes(plan scheduling.NodeClaimPlan, cands []*candidate) scheduling.NodeClaimPlan {
	running := map[string]bool{}
	for _, cand := range cands {
		running[cand.node.Labels[corev1.LabelInstanceTypeStable]] = true
	}
	out := plan
	out.InstanceTypes = nil
	for _, it := range plan.InstanceTypes {
		if !running[it.Name] {
			out.InstanceTypes = append(out.InstanceTypes, it)
		}
	}
	return out
}
