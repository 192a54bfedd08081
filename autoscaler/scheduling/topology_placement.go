package scheduling

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"
)

// placement is a pod's topology state for one placement attempt: the
// constraints to honour, the groups that count it, and the allowed values
// of the offering keys.
type placement struct {
	pi *podInfo
	// constraints are the pod's own constraints and, in a strict
	// placement, the spread constraints of other pods whose selector
	// matches it (see solver.prepare).
	constraints []constraint
	// allowed[k] are the values of offering key k (zone, capacity type)
	// the pod may land in; absentOK[k] says whether a node without the
	// label is acceptable.
	allowed  [keyHostname]uint64
	absentOK [keyHostname]bool
	// pin[k]: the pod must land in one known value of key k, because a
	// constraint or a group that counts it depends on the value.
	pin [keyHostname]bool
	// score[k][v] ranks values for pinning: the pods already in domain v
	// of the groups the pod spreads over or is counted by (lower first).
	score [keyHostname]map[int]int
	// extra are the pod's constraints on keys past the fixed ones, one
	// entry per key (see topology_keys.go); usually none.
	extra []*keyPlacement
	// keys names the topology keys, for errors.
	keys []string
}

// prepare computes the allowed offering values of pi given the counts so
// far. When strict, the pod also honours the spread constraints of the
// groups that count it without being its own (pods that match another
// Deployment's spread selector): the kube-scheduler only checks a spread
// when it binds the pod that carries it, in any order, so a matching pod
// piled into one domain could leave the spreading pods unschedulable.
// Solve places pods strictly first and relaxes this only when nothing
// else fits.
func (s *solver) prepare(pi *podInfo, strict bool) *placement {
	pl := &placement{pi: pi, constraints: pi.constraints, keys: s.topo.keys}
	if strict {
		for _, g := range pi.counted {
			if g.kind == kindSpread && !pi.hasConstraint(g) {
				pl.constraints = append(pl.constraints[:len(pl.constraints):len(pl.constraints)], constraint{g: g, self: true})
			}
		}
	}
	for k := range pl.allowed {
		pl.allowed[k], pl.absentOK[k] = allValues, true
	}
	for _, c := range pl.constraints {
		g := c.g
		if g.key >= numTopologyKeys {
			kp := pl.extraKey(g.key, len(s.topo.domains[g.key].names))
			kp.note(g)
			if g.kind != kindAntiAffinity {
				kp.absentOK = false
			}
			kp.restrict(s.extraAllowedBy(pi, c))
			continue
		}
		pl.note(g)
		if g.key == keyHostname {
			continue
		}
		if g.kind != kindAntiAffinity {
			pl.absentOK[g.key] = false
		}
		pl.allowed[g.key] &= s.allowedBy(pi, c)
	}
	for _, g := range pi.counted {
		if g.key >= numTopologyKeys {
			kp := pl.extraKey(g.key, len(s.topo.domains[g.key].names))
			kp.note(g)
			if g.kind == kindAntiAffinity {
				kp.block(g.owners)
			}
			continue
		}
		pl.note(g)
		if g.kind == kindAntiAffinity && g.key != keyHostname {
			for d, n := range g.owners {
				if n > 0 && d < maxDomainValues {
					pl.allowed[g.key] &^= 1 << d
				}
			}
		}
	}
	return pl
}

// note records that the pod's domain of g's key matters (pin) and adds g's
// counts to the pinning score. Hostname groups are handled per node.
func (pl *placement) note(g *group) {
	if g.key == keyHostname {
		return
	}
	pl.pin[g.key] = true
	if pl.score[g.key] == nil {
		pl.score[g.key] = map[int]int{}
	}
	for d, n := range g.counts {
		pl.score[g.key][d] += n
	}
}

// allowedBy returns the domains (a bit per value of c.g.key) that
// constraint c of pod pi allows, given the counts so far.
func (s *solver) allowedBy(pi *podInfo, c constraint) uint64 {
	g := c.g
	var ok uint64
	switch g.kind {
	case kindSpread:
		ok = s.spreadAllowed(pi, c)
	case kindAffinity:
		if g.total == 0 && c.self {
			return allValues
		}
		for d, n := range g.counts {
			if n > 0 && d < maxDomainValues {
				ok |= 1 << d
			}
		}
	case kindAntiAffinity:
		ok = allValues
		for d, n := range g.counts {
			if n > 0 && d < maxDomainValues {
				ok &^= 1 << d
			}
		}
	}
	return ok
}

// spreadAllowed returns the domains the spread constraint c lets pod pi
// join: those where the count plus the pod (when c.self) exceeds the
// global minimum over the eligible domains by at most maxSkew. With fewer
// eligible domains than minDomains the minimum is 0, as in the
// kube-scheduler.
func (s *solver) spreadAllowed(pi *podInfo, c constraint) uint64 {
	g := c.g
	universe := s.spreadUniverse(pi, g)
	minCount := 0
	if bits.OnesCount64(universe) >= g.minDomains {
		minCount = -1
		for d := 0; d < maxDomainValues; d++ {
			if universe&(1<<d) != 0 && (minCount < 0 || g.counts.get(d) < minCount) {
				minCount = g.counts.get(d)
			}
		}
	}
	self := 0
	if c.self {
		self = 1
	}
	var ok uint64
	for d := 0; d < len(s.topo.domains[g.key].names); d++ {
		if g.counts.get(d)+self-max(minCount, 0) <= g.maxSkew {
			ok |= 1 << d
		}
	}
	return ok
}

// hostAllowed reports whether the pod may join the node with hostname
// domain host (-1: a new node no pod is on yet).
func (pl *placement) hostAllowed(host int) bool {
	for _, c := range pl.constraints {
		g := c.g
		if g.key != keyHostname {
			continue
		}
		n := 0
		if host >= 0 {
			n = g.counts.get(host)
		}
		switch g.kind {
		case kindSpread:
			// A new node is always a domain with no matching pod, so the
			// minimum count is 0.
			self := 0
			if c.self {
				self = 1
			}
			if n+self > g.maxSkew {
				return false
			}
		case kindAffinity:
			if n == 0 && !(g.total == 0 && c.self) {
				return false
			}
		case kindAntiAffinity:
			if n > 0 {
				return false
			}
		}
	}
	if host >= 0 {
		for _, g := range pl.pi.counted {
			if g.kind == kindAntiAffinity && g.key == keyHostname && g.owners.get(host) > 0 {
				return false
			}
		}
	}
	return true
}

// valueAllowed reports whether a node whose offering key k has domain v
// (-1: no such label) is acceptable.
func (pl *placement) valueAllowed(k, v int) bool {
	if v < 0 {
		return pl.absentOK[k]
	}
	return v >= maxDomainValues || pl.allowed[k]&(1<<v) != 0
}

// choices returns, for offering key k, the value sets to try when placing
// on a target whose values are have: have ∩ allowed as one set when the
// key need not be pinned, else one singleton per value, best score first.
func (pl *placement) choices(k int, have uint64) []uint64 {
	ok := have & pl.allowed[k]
	if ok == 0 {
		return nil
	}
	if !pl.pin[k] || bits.OnesCount64(ok) == 1 {
		return []uint64{ok}
	}
	var vals []int
	for rest := ok; rest != 0; rest &= rest - 1 {
		vals = append(vals, bits.TrailingZeros64(rest))
	}
	sort.SliceStable(vals, func(a, b int) bool { return pl.score[k][vals[a]] < pl.score[k][vals[b]] })
	out := make([]uint64, len(vals))
	for i, v := range vals {
		out[i] = 1 << v
	}
	return out
}

// spreadUniverse returns the zone (or capacity type) values a spread
// constraint's skew is computed over for pi: the values of the NodePools'
// offerings and existing nodes, restricted by the pod's node affinity
// (nodeAffinityPolicy Honor, the default) and taints (nodeTaintsPolicy
// Honor).
func (s *solver) spreadUniverse(pi *podInfo, g *group) uint64 {
	// The kube-scheduler computes domains from the pod's own nodeSelector
	// and required node affinity: not from preferences Solve made
	// required, nor from volume requirements.
	if pi.view != pi.pod || len(pi.volume) > 0 {
		pi = newPodInfo(pi.pod, pi.pod, nil)
	}
	cacheKey := fmt.Sprintf("%d|%t|%t|%s", g.key, g.honorAffinity, g.honorTaints, pi.signature)
	if u, ok := s.topo.universe[cacheKey]; ok {
		return u
	}
	var u uint64
	for _, p := range s.pools {
		if p.err != nil {
			continue
		}
		if g.honorTaints {
			if _, blocked := blockingTaint(p.taints, pi.view.Spec.Tolerations); blocked {
				continue
			}
		}
		if !g.honorAffinity {
			for i := range p.types {
				u |= p.valuesOf(g.key, i, p.offerings[i])
			}
			continue
		}
		f := p.fit(pi)
		for _, tf := range f.terms {
			for i := range p.types {
				u |= p.valuesOf(g.key, i, tf.masks[i])
			}
		}
	}
	req := pi.nodeAffinity
	for _, n := range s.existing {
		d := n.dom.fixed[g.key]
		if d < 0 || d >= maxDomainValues {
			continue
		}
		if g.honorTaints {
			if _, blocked := blockingTaint(n.node.Taints, pi.view.Spec.Tolerations); blocked {
				continue
			}
		}
		if g.honorAffinity {
			if ok, err := req.Match(n.k8sNode); err != nil || !ok {
				continue
			}
		}
		u |= 1 << d
	}
	s.topo.universe[cacheKey] = u
	return u
}

// describe names the pod's constraints on topology key k, for errors.
func (pl *placement) describe(k int) string {
	var out []string
	for _, c := range pl.constraints {
		if c.g.key == k {
			out = append(out, c.g.description)
		}
	}
	for _, g := range pl.pi.counted {
		if g.key == k && g.kind == kindAntiAffinity && g.owners.any() {
			out = append(out, "the "+g.description+" of pods already placed")
		}
	}
	if len(out) == 0 {
		return "constraints on " + pl.keys[k]
	}
	return strings.Join(out, " and ")
}
