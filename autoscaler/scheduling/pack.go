package scheduling

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// existing is an ExistingNode being filled (pipeline step 3).
type existing struct {
	node    ExistingNode
	k8sNode *corev1.Node // name and labels, for nodeaffinity matching
	// dom is the node's domain per topology key (-1: label absent).
	dom       nodeDomains
	available vector
	ports     hostPorts
	pods      []*corev1.Pod
}

// tryAdd places pi on the node if the pod tolerates its taints, its
// nodeSelector, required node affinity and volume requirements match the
// node's labels and name, its host ports are free, its topology
// constraints allow the node's domains, and its requests fit what is left.
func (n *existing) tryAdd(pi *podInfo, plc *placement) bool {
	if !pi.vec.fitsIn(n.available) {
		return false
	}
	if _, blocked := blockingTaint(n.node.Taints, pi.view.Spec.Tolerations); blocked {
		return false
	}
	if ok, err := pi.nodeAffinity.Match(n.k8sNode); err != nil || !ok {
		return false
	}
	for _, r := range pi.volume {
		v, ok := n.node.Labels[r.Key]
		if !r.Allows(v, ok) {
			return false
		}
	}
	if n.ports.conflicts(pi.ports) || !plc.hostAllowed(n.dom.fixed[keyHostname]) ||
		!plc.valueAllowed(keyZone, n.dom.fixed[keyZone]) || !plc.valueAllowed(keyCapacityType, n.dom.fixed[keyCapacityType]) ||
		!plc.extraAllowed(&n.dom) {
		return false
	}
	n.available = n.available.minus(pi.vec)
	n.pods = append(n.pods, pi.pod)
	n.ports = n.ports.add(pi.ports)
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
	// pods' expressions on them and the topology domains the plan is
	// pinned to; pins are those domains' requirements (topology_keys.go).
	abstract requirementSet
	pins     []requirement
	// requests is the sum of the pods' requests (the DaemonSet overhead is
	// per instance type, in pool.avail).
	requests vector
	// host is the plan's hostname domain; ports are its pods' host ports.
	host  int
	ports hostPorts
	// values[k] are the zone and capacity type values its candidates
	// still offer; maxAvail is, per resource, the most any candidate
	// leaves for pods (a quick reject before narrow).
	values   [keyHostname]uint64
	maxAvail vector
	candidates
	// accounted is the capacity counted against the NodePool's Remaining:
	// that of the cheapest candidate. nil when the NodePool is unlimited.
	accounted vector
	// held are the ledger indexes, sorted, of the capacity reservations
	// the plan holds a place in (reservations.go).
	held []int
}

// candidates are the instance types a plan may still launch: indexes into
// pool.types, each with the bitmask of its usable offerings, and the index
// (into types) of the one with the cheapest offering.
type candidates struct {
	types    []int
	masks    []uint64
	cheapest int
}

// misfit says why a plan cannot take a pod.
type misfit int

const (
	fits               misfit = iota
	misfitResources           // no candidate has room for the requests
	misfitLimits              // every candidate with room exceeds the NodePool's limits
	misfitMinValues           // too few values of a minValues key would be left
	misfitReservations        // every candidate with room is only in full capacity reservations
)

// narrow returns the candidates of from that the pod term accepts
// (termMasks), whose allocatable holds requests and whose capacity fits in
// budget (nil: unlimited), and whether they still satisfy minValues.
// Reserved offerings of a capacity reservation with no free place are
// dropped unless held (the plan's ledger indexes, sorted) has it.
func (p *pool) narrow(from candidates, termMasks []uint64, restrict [keyHostname]uint64, requests, budget vector, held []int) (candidates, misfit) {
	out := candidates{cheapest: -1, types: make([]int, 0, len(from.types)), masks: make([]uint64, 0, len(from.types))}
	best := math.Inf(1)
	hasRoom, full := false, false
	for k, i := range from.types {
		m := from.masks[k] & termMasks[i] & p.offeringsIn(i, restrict)
		if m == 0 || !requests.fitsIn(p.avail[i]) {
			continue
		}
		hasRoom = true
		if p.anyReserved && m&p.reservedMask[i] != 0 {
			if m = p.withoutFullReservations(i, m, held); m == 0 {
				full = true
				continue
			}
		}
		if budget != nil && !p.capacity[i].fitsInLimited(budget, p.limited) {
			continue
		}
		out.types = append(out.types, i)
		out.masks = append(out.masks, m)
		if price := p.cheapestPrice(i, m); out.cheapest < 0 || price < best {
			best, out.cheapest = price, len(out.types)-1
		}
	}
	switch {
	case !hasRoom:
		return out, misfitResources
	case len(out.types) == 0 && full:
		return out, misfitReservations
	case len(out.types) == 0:
		return out, misfitLimits
	case !p.relaxMinValues && p.checkMinValues(out) != nil:
		return out, misfitMinValues
	}
	return out, fits
}

// budget is what the NodePool's limits leave for a plan that currently
// counts accounted against them; nil when the NodePool is unlimited.
func (p *pool) budget(accounted vector) vector {
	if !p.hasLimits {
		return nil
	}
	b := p.remaining.minus(p.used)
	if accounted != nil {
		b = b.plus(accounted)
	}
	return b
}

// checkMinValues returns an error when the candidates keep fewer distinct
// values of a key than the NodePool's minValues for it.
func (p *pool) checkMinValues(c candidates) error {
	for _, r := range p.minValues {
		if n := len(p.distinctValues(r.Key, c, r.MinValues)); n < r.MinValues {
			return fmt.Errorf("NodePool %q requires minValues %d for %s but only %d value(s) fit the pods (lower minValues or relax the pod's requirements)", p.name, r.MinValues, r.Key, n)
		}
	}
	return nil
}

// distinctValues returns up to limit distinct values of key among the
// candidates (limit <= 0: all).
func (p *pool) distinctValues(key string, c candidates, limit int) map[string]struct{} {
	seen := map[string]struct{}{}
	for k, i := range c.types {
		for _, v := range p.values(key, i, c.masks[k]) {
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
func (s *solver) newPlan(p *pool, pi *podInfo, tf *termFit, plc *placement) (*plan, error) {
	all := candidates{types: make([]int, len(p.types)), masks: p.offerings}
	for i := range all.types {
		all.types[i] = i
	}
	if !plc.hostAllowed(-1) {
		return nil, fmt.Errorf("a new node in NodePool %q would break the pod's %s", p.name, plc.describe(keyHostname))
	}
	abstract, _ := intersectAll(p.abstract, tf.abstract) // fitTerm checked it is satisfiable
	var termValues [keyHostname]uint64
	for k := range termValues {
		for i := range p.types {
			termValues[k] |= p.valuesOf(k, i, tf.masks[i])
		}
	}
	zones, capacityTypes := plc.choices(keyZone, termValues[keyZone]), plc.choices(keyCapacityType, termValues[keyCapacityType])
	switch {
	case len(zones) == 0:
		return nil, fmt.Errorf("no zone NodePool %q offers the pod satisfies its %s", p.name, plc.describe(keyZone))
	case len(capacityTypes) == 0:
		return nil, fmt.Errorf("no capacity type NodePool %q offers the pod satisfies its %s", p.name, plc.describe(keyCapacityType))
	}
	picks, missing := plc.extraChoices(p, all, tf.masks, abstract)
	if len(picks) == 0 {
		return nil, fmt.Errorf("no %s value NodePool %q can give the node satisfies the pod's %s", s.topo.keys[missing], p.name, plc.describe(missing))
	}
	requests := pi.vec
	var (
		c   candidates
		why misfit = misfitResources
	)
	for _, pk := range picks {
		masks, abs := tf.masks, abstract
		var pins []requirement
		if len(pk) > 0 {
			masks, abs, pins = p.applyPicks(pk, masks, abs)
		}
		for _, z := range zones {
			for _, ct := range capacityTypes {
				var w misfit
				if c, w = p.narrow(all, masks, [keyHostname]uint64{z, ct}, requests, p.budget(nil), nil); w == fits {
					pl := &plan{pool: p, requests: requests, abstract: abs, pins: pins, host: s.newHost()}
					pl.commit(pi, tf, c)
					return pl, nil
				}
				if why != misfitReservations {
					why = w
				}
			}
		}
	}
	switch why {
	case misfitReservations:
		return nil, p.errReservationsFull(p.fullReservations(tf.masks))
	case misfitLimits:
		return nil, fmt.Errorf("NodePool %q limits reached: every instance type that fits would exceed the remaining %s (raise spec.limits)", p.name, p.dims.format(p.budget(nil).onlyLimited(p.limited)))
	case misfitMinValues:
		return nil, p.checkMinValues(c)
	}
	return nil, p.explainNoRoom(all, tf, requests)
}

// mayTake is tryAdd's quick reject, before any per-term work: the pod's
// requests fit the roomiest candidate, its host ports are free and its
// hostname constraints allow the plan.
func (pl *plan) mayTake(pi *podInfo, plc *placement) bool {
	for d, v := range pi.vec {
		if pl.requests[d]+v > pl.maxAvail[d] {
			return false
		}
	}
	return !pl.ports.conflicts(pi.ports) && plc.hostAllowed(pl.host)
}

// tryAdd adds pi to the plan with term tf if the pod's custom-label
// expressions agree with the plan's other pods, its host ports are free,
// its topology constraints allow the plan's domains (pinning its zone or
// capacity type when they depend on it) and a candidate still fits them
// all; it reports whether it did.
func (pl *plan) tryAdd(pi *podInfo, tf *termFit, plc *placement) bool {
	p := pl.pool
	requests := pl.requests.plus(pi.vec)
	zones := plc.choices(keyZone, pl.values[keyZone])
	capacityTypes := plc.choices(keyCapacityType, pl.values[keyCapacityType])
	if len(zones) == 0 || len(capacityTypes) == 0 {
		return false
	}
	abstract := pl.abstract
	if len(tf.abstract) > 0 && !pl.hasTerm(tf) {
		var err error
		if abstract, err = intersectAll(abstract, tf.abstract); err != nil {
			return false
		}
	}
	picks, _ := plc.extraChoices(p, pl.candidates, tf.masks, abstract)
	for _, pk := range picks {
		masks, abs := tf.masks, abstract
		var pins []requirement
		if len(pk) > 0 {
			masks, abs, pins = p.applyPicks(pk, masks, abs)
		}
		for _, z := range zones {
			for _, ct := range capacityTypes {
				c, why := p.narrow(pl.candidates, masks, [keyHostname]uint64{z, ct}, requests, p.budget(pl.accounted), pl.held)
				if why == fits {
					pl.requests, pl.abstract = requests, abs
					pl.pins = append(pl.pins, pins...)
					pl.commit(pi, tf, c)
					return true
				}
			}
		}
	}
	return false
}

// intersectAll returns a copy of set with exprs intersected in, or an error
// naming the expressions that leave a key unsatisfiable.
func intersectAll(set requirementSet, exprs []requirement) (requirementSet, error) {
	out := set.Copy()
	for _, e := range exprs {
		out.Add(e)
		if r := out[e.Key]; r.Empty() {
			return nil, fmt.Errorf("%s contradict each other", r.Origin)
		}
	}
	return out, nil
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

// commit records pi on the plan with the narrowed candidates and updates
// the capacity counted against the NodePool's limits.
func (pl *plan) commit(pi *podInfo, tf *termFit, c candidates) {
	p := pl.pool
	pl.pods = append(pl.pods, pi)
	if !pl.hasTerm(tf) {
		pl.terms = append(pl.terms, tf)
	}
	pl.candidates = c
	pl.hold(p.reservationsOf(c))
	pl.ports = pl.ports.add(pi.ports)
	pl.maxAvail = make(vector, len(p.dims.names))
	pl.values = [keyHostname]uint64{}
	for k, i := range c.types {
		for d, v := range p.avail[i] {
			pl.maxAvail[d] = max(pl.maxAvail[d], v)
		}
		for key := range pl.values {
			pl.values[key] |= p.valuesOf(key, i, c.masks[k])
		}
	}
	if p.hasLimits {
		if pl.accounted != nil {
			p.used = p.used.minus(pl.accounted)
		}
		pl.accounted = p.capacity[c.types[c.cheapest]]
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

// hasOverhead reports whether any type carries DaemonSet overhead.
func (p *pool) hasOverhead() bool {
	for _, o := range p.overhead {
		for _, v := range o {
			if v != 0 {
				return true
			}
		}
	}
	return false
}

// explainNoRoom names the resources of requests that exceed the largest
// allocatable, per resource, of the candidates tf accepts.
func (p *pool) explainNoRoom(c candidates, tf *termFit, requests vector) error {
	largest := make(vector, len(requests))
	for k, i := range c.types {
		if c.masks[k]&tf.masks[i] == 0 {
			continue
		}
		for d, v := range p.avail[i] {
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
	if len(over) == 0 {
		return fmt.Errorf("no compatible instance type in NodePool %q has room for %s in any one of them", p.name, p.dims.format(requests))
	}
	overhead := ""
	if p.hasOverhead() {
		overhead = " after DaemonSet overhead"
	}
	for d, name := range p.dims.names {
		if requests[d] >= maxAmount {
			return fmt.Errorf("the pod requests %s=%s, more than any machine has: no instance type in NodePool %q can hold it (fix the request; a unit typo such as Ei for Gi is likely)",
				name, quantity(name, requests[d]), p.name)
		}
	}
	return fmt.Errorf("no compatible instance type in NodePool %q has room for %s: the largest allocatable%s is %s (lower the requests or allow larger instance types)",
		p.name, strings.Join(over, ", "), overhead, strings.Join(most, ", "))
}
