package scheduling

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// inFlight is an ExistingNode being filled (pipeline step 3).
type inFlight struct {
	node      ExistingNode
	k8sNode   *corev1.Node // name and labels, for nodeaffinity matching
	available vector
	pods      []*corev1.Pod
}

// tryAdd places pi on the node if the pod tolerates its taints, its
// nodeSelector and required node affinity match the node's labels and
// name, and its requests fit what is left.
func (n *inFlight) tryAdd(pi *podInfo) bool {
	if !pi.vec.fitsIn(n.available) {
		return false
	}
	if _, blocked := blockingTaint(n.node.Taints, pi.pod.Spec.Tolerations); blocked {
		return false
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pi.pod).Match(n.k8sNode); err != nil || !ok {
		return false
	}
	n.available = n.available.minus(pi.vec)
	n.pods = append(n.pods, pi.pod)
	return true
}

// plan is a NodeClaimPlan being built: its pods and the candidate instance
// types (with offerings) that still fit all of them.
type plan struct {
	pool *pool
	pods []*podInfo
	// terms are the distinct pod terms the plan's pods were placed with.
	terms []*termFit
	// abstract narrows the NodePool's requirements on custom labels by the
	// pods' expressions on them.
	abstract requirementSet
	// requests is the pods' requests plus the NodePool's DaemonSet overhead.
	requests vector
	// types indexes pool.types; masks are the usable offerings of each.
	types []int
	masks []uint64
	// cheapest indexes types: the one whose cheapest offering is cheapest.
	cheapest int
	// accounted is the capacity counted against the NodePool's Remaining
	// (that of the cheapest type).
	accounted vector
}

// hasTerm reports whether tf was already applied to the plan.
func (pl *plan) hasTerm(tf *termFit) bool {
	for _, t := range pl.terms {
		if t == tf {
			return true
		}
	}
	return false
}

// narrowing is the candidate set a plan would have after taking a pod.
type narrowing struct {
	types    []int
	masks    []uint64
	cheapest int
	abstract requirementSet
}

// narrow computes the candidates left if a plan with candidates
// (types, masks), custom-label requirements abstract and the given
// accounted capacity took a pod with term tf, for total requests: every
// offering must satisfy tf, every type must fit requests in its allocatable
// and its capacity in what the NodePool limits leave, and minValues must
// still hold. It returns why not when nothing is left.
func (p *pool) narrow(types []int, masks []uint64, abstract requirementSet, accounted vector, tf *termFit, requests vector) (narrowing, error) {
	out := narrowing{abstract: abstract, cheapest: -1}
	if len(tf.abstract) > 0 {
		out.abstract = abstract.copy()
		for _, e := range tf.abstract {
			out.abstract.add(e)
			if r := out.abstract[e.key]; r.empty() {
				return out, fmt.Errorf("%s contradicts %s of the other pods on the node", e.origin, r.origin)
			}
		}
	}
	var budget vector
	if p.hasLimits {
		budget = p.remaining.minus(p.used)
		if accounted != nil {
			budget = budget.plus(accounted)
		}
	}
	best := math.Inf(1)
	fitsResources, fitsLimits := false, false
	for k, i := range types {
		m := masks[k] & tf.masks[i]
		if m == 0 || !requests.fitsIn(p.allocatable[i]) {
			continue
		}
		fitsResources = true
		if budget != nil && !p.capacity[i].fitsInLimited(budget, p.limited) {
			continue
		}
		fitsLimits = true
		out.types = append(out.types, i)
		out.masks = append(out.masks, m)
		if price := p.cheapestPrice(i, m); price < best || out.cheapest < 0 {
			best, out.cheapest = price, len(out.types)-1
		}
	}
	switch {
	case !fitsResources:
		return out, p.explainNoRoom(types, masks, tf, requests)
	case !fitsLimits:
		return out, fmt.Errorf("NodePool %q limits reached: every instance type that fits would exceed the remaining %s (raise spec.limits)", p.name, p.dims.format(budget.onlyLimited(p.limited)))
	}
	if err := p.checkMinValues(out.types, out.masks); err != nil {
		return out, err
	}
	return out, nil
}

// checkMinValues returns an error when the candidates keep fewer distinct
// values of a key than the NodePool's minValues for it.
func (p *pool) checkMinValues(types []int, masks []uint64) error {
	for _, r := range p.minValues {
		if n := len(p.distinctValues(r.key, types, masks, r.minValues)); n < r.minValues {
			return fmt.Errorf("NodePool %q requires minValues %d for %s but only %d value(s) fit the pods", p.name, r.minValues, r.key, n)
		}
	}
	return nil
}

// distinctValues returns up to limit distinct values of key among the
// candidates (limit <= 0: all).
func (p *pool) distinctValues(key string, types []int, masks []uint64, limit int) map[string]struct{} {
	seen := map[string]struct{}{}
	for k, i := range types {
		for _, v := range p.values(key, i, masks[k]) {
			seen[v] = struct{}{}
		}
		if limit > 0 && len(seen) >= limit {
			break
		}
	}
	return seen
}

// values returns the values of key on type p.types[i] restricted to the
// offerings in mask: one for a type label, one per offering for zone and
// capacity type, none when the type lacks the label.
func (p *pool) values(key string, i int, mask uint64) []string {
	it := p.types[i]
	if !isOfferingKey(key) {
		if v, ok := typeLabel(it, key); ok {
			return []string{v}
		}
		return nil
	}
	var out []string
	for k, o := range it.Offerings {
		if k < maxOfferings && mask&(1<<k) != 0 {
			out = append(out, offeringLabel(o, key))
		}
	}
	return out
}

// newPlan opens a plan on the pool for pi with term tf, or says why it
// cannot.
func (p *pool) newPlan(pi *podInfo, tf *termFit) (*plan, error) {
	all := make([]int, len(p.types))
	for i := range all {
		all[i] = i
	}
	abstract := requirementSet{}
	for k, r := range p.requirements {
		if !p.typeKeys[k] {
			abstract[k] = r
		}
	}
	requests := p.overheadVec.plus(pi.vec)
	n, err := p.narrow(all, p.offerings, abstract, nil, tf, requests)
	if err != nil {
		return nil, err
	}
	pl := &plan{pool: p, requests: requests}
	pl.commit(pi, tf, n)
	return pl, nil
}

// tryAdd adds pi to the plan with term tf if a candidate still fits.
func (pl *plan) tryAdd(pi *podInfo, tf *termFit) bool {
	abstract := pl.abstract
	term := tf
	if pl.hasTerm(tf) {
		// Already intersected: only resources can rule the pod out.
		term = &termFit{masks: tf.masks}
	}
	requests := pl.requests.plus(pi.vec)
	n, err := pl.pool.narrow(pl.types, pl.masks, abstract, pl.accounted, term, requests)
	if err != nil {
		return false
	}
	pl.requests = requests
	pl.commit(pi, tf, n)
	return true
}

// commit records pi on the plan with the narrowed candidates and updates
// the capacity counted against the NodePool's limits.
func (pl *plan) commit(pi *podInfo, tf *termFit, n narrowing) {
	p := pl.pool
	pl.pods = append(pl.pods, pi)
	if !pl.hasTerm(tf) {
		pl.terms = append(pl.terms, tf)
	}
	pl.types, pl.masks, pl.cheapest, pl.abstract = n.types, n.masks, n.cheapest, n.abstract
	if p.hasLimits {
		if pl.accounted != nil {
			p.used = p.used.minus(pl.accounted)
		}
		pl.accounted = p.capacity[pl.types[pl.cheapest]]
		p.used = p.used.plus(pl.accounted)
	}
}

// onlyLimited zeroes the dimensions no limit caps, for error messages.
func (v vector) onlyLimited(limited []bool) vector {
	out := make(vector, len(v))
	for i := range v {
		if limited[i] {
			out[i] = v[i]
		}
	}
	return out
}

// explainNoRoom names the resources of requests that exceed the largest
// allocatable, per resource, of the candidates tf accepts.
func (p *pool) explainNoRoom(types []int, masks []uint64, tf *termFit, requests vector) error {
	largest := make(vector, len(requests))
	for k, i := range types {
		if masks[k]&tf.masks[i] == 0 {
			continue
		}
		for d, v := range p.allocatable[i] {
			largest[d] = max(largest[d], v)
		}
	}
	var over, most []string
	for d, name := range p.dims.names {
		if requests[d] > largest[d] {
			over = append(over, fmt.Sprintf("%s=%s", name, quantity(name, requests[d])))
			most = append(most, fmt.Sprintf("%s=%s", name, quantity(name, largest[d])))
		}
	}
	overhead := ""
	if f := p.dims.format(p.overheadVec); f != "nothing" {
		overhead = fmt.Sprintf(" (including DaemonSet overhead %s)", f)
	}
	return fmt.Errorf("no compatible instance type in NodePool %q has room for %s%s: the largest allocatable is %s (lower the requests or allow larger instance types)",
		p.name, strings.Join(over, ", "), overhead, strings.Join(most, ", "))
}
