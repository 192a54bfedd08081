package scheduling

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Topology keys past the fixed three (zone, capacity type, hostname): any
// label a node launched from a NodePool carries. As in Karpenter
// (sigs.k8s.io/karpenter v1.14.0 pkg/controllers/provisioning/scheduling/
// topology.go and topologygroup.go), a key's domains are the values the
// NodePools can produce (their instance types' labels, their requirements
// and template labels) and the values existing nodes carry; a new node is
// pinned to one domain of each key its pod's constraints (or the groups
// that count the pod) depend on, by narrowing the plan's instance types
// (a label the instance type sets, e.g. karpenter.k8s.aws/instance-family
// or node.kubernetes.io/instance-type) or by adding "key In (value)" to
// the plan's requirements (a NodePool label or requirement key, which the
// NodeClaim then carries as a label).
//
// These keys have no bound on their number of values (an instance type
// key has hundreds), so their sets are []bool indexed by domain instead of
// the uint64 bitmasks of zone and capacity type.

// keyPlacement is a placement's state for one key past the fixed ones.
type keyPlacement struct {
	key int
	// n is the number of domains of the key.
	n int
	// allowed[d] (len n) says whether domain d is allowed; nil: every
	// domain.
	allowed []bool
	// absentOK: a node without the label is acceptable (no spread or
	// affinity constraint on the key).
	absentOK bool
	// score[d] ranks domains for pinning, as placement.score.
	score map[int]int
}

// extraKey returns the placement's state for key k with n domains,
// creating it.
func (pl *placement) extraKey(k, n int) *keyPlacement {
	for _, kp := range pl.extra {
		if kp.key == k {
			return kp
		}
	}
	kp := &keyPlacement{key: k, n: n, absentOK: true, score: map[int]int{}}
	pl.extra = append(pl.extra, kp)
	return kp
}

// note adds g's counts to the pinning score.
func (kp *keyPlacement) note(g *group) {
	for d, n := range g.counts {
		kp.score[d] += n
	}
}

// restrict intersects the allowed domains with ok (len n; nil: all).
func (kp *keyPlacement) restrict(ok []bool) {
	switch {
	case ok == nil:
	case kp.allowed == nil:
		kp.allowed = append([]bool(nil), ok...)
	default:
		for d := range kp.allowed {
			kp.allowed[d] = kp.allowed[d] && ok[d]
		}
	}
}

// block removes the domains where owners counts pods.
func (kp *keyPlacement) block(owners domainCounts) {
	for d := range kp.n {
		if owners.get(d) == 0 {
			continue
		}
		if kp.allowed == nil {
			kp.allowed = make([]bool, kp.n)
			for i := range kp.allowed {
				kp.allowed[i] = true
			}
		}
		kp.allowed[d] = false
	}
}

// allows reports whether domain d (-1: label absent) is acceptable.
func (kp *keyPlacement) allows(d int) bool {
	switch {
	case d < 0:
		return kp.absentOK
	case kp.allowed == nil || d >= len(kp.allowed):
		// Every domain is interned before placement starts; a later one
		// has no pod counted in it.
		return true
	}
	return kp.allowed[d]
}

// extraAllowed reports whether a node with domains dom satisfies the
// placement's constraints on keys past the fixed ones.
func (pl *placement) extraAllowed(dom *nodeDomains) bool {
	for _, kp := range pl.extra {
		if !kp.allows(dom.of(kp.key)) {
			return false
		}
	}
	return true
}

// extraAllowedBy returns the domains of c.g.key that constraint c of pi
// allows given the counts so far (nil: all), as allowedBy and
// spreadAllowed do for zone and capacity type.
func (s *solver) extraAllowedBy(pi *podInfo, c constraint) []bool {
	g := c.g
	n := len(s.topo.domains[g.key].names)
	ok := make([]bool, n)
	switch g.kind {
	case kindSpread:
		universe := s.extraUniverse(pi, g)
		eligible, minCount := 0, -1
		for d, in := range universe {
			if in {
				eligible++
				if minCount < 0 || g.counts.get(d) < minCount {
					minCount = g.counts.get(d)
				}
			}
		}
		if eligible < g.minDomains {
			minCount = 0
		}
		self := 0
		if c.self {
			self = 1
		}
		for d := range ok {
			ok[d] = g.counts.get(d)+self-max(minCount, 0) <= g.maxSkew
		}
	case kindAffinity:
		if g.total == 0 && c.self {
			return nil
		}
		for d := range ok {
			ok[d] = g.counts.get(d) > 0
		}
	case kindAntiAffinity:
		for d := range ok {
			ok[d] = g.counts.get(d) == 0
		}
	}
	return ok
}

// extraUniverse is spreadUniverse for a key past the fixed ones: the
// domains the NodePools can produce for pi (their instance types' label
// values, or the values their requirements and labels allow), restricted
// by the pod's node affinity and taints as the spread's policies say, and
// the domains of the existing nodes that pass the same filters.
func (s *solver) extraUniverse(pi *podInfo, g *group) []bool {
	if pi.view != pi.pod || len(pi.volume) > 0 {
		pi = newPodInfo(pi.pod, pi.pod, nil)
	}
	cacheKey := fmt.Sprintf("%d|%t|%t|%s", g.key, g.honorAffinity, g.honorTaints, pi.signature)
	if u, ok := s.topo.extraUniverse[cacheKey]; ok {
		return u
	}
	u := make([]bool, len(s.topo.domains[g.key].names))
	key := s.topo.keys[g.key]
	for _, p := range s.pools {
		if p.err != nil {
			continue
		}
		if g.honorTaints {
			if _, blocked := blockingTaint(p.taints, pi.view.Spec.Tolerations); blocked {
				continue
			}
		}
		var terms []*termFit
		if g.honorAffinity {
			terms = p.fit(pi).terms
			if len(terms) == 0 {
				continue
			}
		}
		if p.typeKeys[key] {
			doms := p.typeDomains(g.key)
			for i := range p.types {
				mask := p.offerings[i]
				if g.honorAffinity {
					mask = 0
					for _, tf := range terms {
						mask |= tf.masks[i]
					}
				}
				if mask != 0 && doms[i] >= 0 {
					u[doms[i]] = true
				}
			}
			continue
		}
		r, ok := p.requirements[key]
		if !ok {
			continue
		}
		if !g.honorAffinity {
			for _, d := range s.topo.allowedDomains(g.key, r) {
				u[d] = true
			}
			continue
		}
		for _, tf := range terms {
			rr := r
			for _, e := range tf.abstract {
				if e.Key == key {
					rr = rr.Intersect(e)
				}
			}
			for _, d := range s.topo.allowedDomains(g.key, rr) {
				u[d] = true
			}
		}
	}
	for _, n := range s.existing {
		d := n.dom.of(g.key)
		if d < 0 || d >= len(u) {
			continue
		}
		if g.honorTaints {
			if _, blocked := blockingTaint(n.node.Taints, pi.view.Spec.Tolerations); blocked {
				continue
			}
		}
		if g.honorAffinity {
			if ok, err := pi.nodeAffinity.Match(n.k8sNode); err != nil || !ok {
				continue
			}
		}
		u[d] = true
	}
	s.topo.extraUniverse[cacheKey] = u
	return u
}

// allowedDomains returns the known domains of key k that r allows, in
// index order.
func (t *topology) allowedDomains(k int, r requirement) []int {
	var out []int
	for d, v := range t.domains[k].names {
		if r.Allows(v, true) {
			out = append(out, d)
		}
	}
	return out
}

// typeDomains returns, per candidate type, its domain of key k (a label
// the instance types set), -1 when the type lacks the label. Cached.
func (p *pool) typeDomains(k int) []int {
	if doms, ok := p.keyDomains[k]; ok {
		return doms
	}
	key := p.topo.keys[k]
	doms := make([]int, len(p.types))
	for i, it := range p.types {
		doms[i] = -1
		if v, ok := typeLabel(it, key); ok {
			doms[i] = p.topo.valueIndex(k, v)
		}
	}
	if p.keyDomains == nil {
		p.keyDomains = map[int][]int{}
	}
	p.keyDomains[k] = doms
	return doms
}

// extraPick pins one key past the fixed ones to domain d (-1: a node
// without the label).
type extraPick struct {
	kp *keyPlacement
	d  int
}

// noPicks is the one, empty, choice of a placement without constraints on
// keys past the fixed ones.
var noPicks = [][]extraPick{nil}

// maxExtraChoices bounds the combinations of domains tried for one
// placement on one target (several keys multiply their domains).
const maxExtraChoices = 4096

// extraChoices returns the combinations of domains, one per constrained
// key past the fixed ones, that a plan of pool p with candidates c (as
// narrowed by masks) and custom-label requirements abstract can be pinned
// to, best score first; and, when there is none, the index of the key
// that has no acceptable domain.
func (pl *placement) extraChoices(p *pool, c candidates, masks []uint64, abstract requirementSet) ([][]extraPick, int) {
	if len(pl.extra) == 0 {
		return noPicks, -1
	}
	out := [][]extraPick{nil}
	for _, kp := range pl.extra {
		doms := pl.domainsOn(p, kp, c, masks, abstract)
		if len(doms) == 0 {
			return nil, kp.key
		}
		next := make([][]extraPick, 0, len(out)*len(doms))
		for _, prev := range out {
			for _, d := range doms {
				if len(next) == maxExtraChoices {
					break
				}
				next = append(next, append(prev[:len(prev):len(prev)], extraPick{kp: kp, d: d}))
			}
		}
		out = next
	}
	return out, -1
}

// domainsOn returns the acceptable domains of kp's key a plan of pool p
// with candidates c (narrowed by masks) and requirements abstract can
// still take, lowest score first (then by index), with -1 (no label)
// last when acceptable.
func (pl *placement) domainsOn(p *pool, kp *keyPlacement, c candidates, masks []uint64, abstract requirementSet) []int {
	key := p.topo.keys[kp.key]
	var out []int
	absent := false
	if p.typeKeys[key] {
		doms := p.typeDomains(kp.key)
		seen := map[int]bool{}
		for j, i := range c.types {
			if c.masks[j]&masks[i] == 0 {
				continue
			}
			switch d := doms[i]; {
			case d < 0:
				absent = true
			case !seen[d]:
				seen[d] = true
				if kp.allows(d) {
					out = append(out, d)
				}
			}
		}
	} else if r, ok := abstract[key]; ok {
		for _, d := range p.topo.allowedDomains(kp.key, r) {
			if kp.allows(d) {
				out = append(out, d)
			}
		}
	} else {
		absent = true
	}
	sort.SliceStable(out, func(a, b int) bool {
		if sa, sb := kp.score[out[a]], kp.score[out[b]]; sa != sb {
			return sa < sb
		}
		return out[a] < out[b]
	})
	if absent && kp.absentOK {
		out = append(out, -1)
	}
	return out
}

// applyPicks narrows a plan's term masks (instance type keys) and
// requirements (other keys) to the picked domains; pins are the
// requirements it added.
func (p *pool) applyPicks(picks []extraPick, masks []uint64, abstract requirementSet) (_ []uint64, _ requirementSet, pins []requirement) {
	for _, pk := range picks {
		key := p.topo.keys[pk.kp.key]
		if p.typeKeys[key] {
			doms := p.typeDomains(pk.kp.key)
			narrowed := make([]uint64, len(masks))
			for i, m := range masks {
				if doms[i] == pk.d {
					narrowed[i] = m
				}
			}
			masks = narrowed
			continue
		}
		if pk.d < 0 {
			continue // no requirement on the key: the node has no such label
		}
		v := p.topo.domains[pk.kp.key].names[pk.d]
		r, err := newRequirement(key, corev1.NodeSelectorOpIn, []string{v}, nil, fmt.Sprintf("topology domain %s=%s", key, v))
		if err != nil {
			continue // unreachable: In with one value parses
		}
		abstract = abstract.Copy()
		abstract.Add(r)
		pins = append(pins, r)
	}
	return masks, abstract, pins
}

// extraDomains returns the plan's domain of each key past the fixed ones:
// the one value its candidate types carry (instance type keys) or its
// requirements allow (other keys), -1 when there are several or none.
func (pl *plan) extraDomains() []int {
	t := pl.pool.topo
	n := len(t.keys) - numTopologyKeys
	if n <= 0 {
		return nil
	}
	out := make([]int, n)
	for x := range out {
		k := numTopologyKeys + x
		out[x] = -1
		key := t.keys[k]
		if pl.pool.typeKeys[key] {
			doms := pl.pool.typeDomains(k)
			for j, i := range pl.types {
				if j == 0 {
					out[x] = doms[i]
				} else if doms[i] != out[x] {
					out[x] = -1
					break
				}
			}
			continue
		}
		if r, ok := pl.abstract[key]; ok && !r.Allows(unlistedValue, true) {
			if ds := t.allowedDomains(k, r); len(ds) == 1 {
				out[x] = ds[0]
			}
		}
	}
	return out
}

// unlistedValue is a label value no requirement lists (not a valid label
// value): a requirement that allows it allows values beyond its list.
const unlistedValue = "\x00"

// internExtraDomains registers the values of every key past the fixed
// ones that the NodePools can produce (instance type labels, In
// requirements, template labels, the NodePool and node class labels) and
// the existing nodes carry, sorted per key.
func (s *solver) internExtraDomains(in Input) {
	for k := numTopologyKeys; k < len(s.topo.keys); k++ {
		key := s.topo.keys[k]
		values := map[string]struct{}{}
		for _, np := range in.NodePools {
			if np.NodePool == nil {
				continue
			}
			for _, it := range np.InstanceTypes {
				if it == nil {
					continue
				}
				if v, ok := typeLabel(it, key); ok {
					values[v] = struct{}{}
				}
			}
			tmpl := np.NodePool.Spec.Template
			for _, r := range tmpl.Spec.Requirements {
				if normalizeKey(r.Key) == key && r.Operator == corev1.NodeSelectorOpIn {
					for _, v := range r.Values {
						values[v] = struct{}{}
					}
				}
			}
			if v, ok := tmpl.Labels[key]; ok {
				values[v] = struct{}{}
			}
			if key == karpv1.NodePoolLabelKey {
				values[np.NodePool.Name] = struct{}{}
			}
			if ref := tmpl.Spec.NodeClassRef; ref != nil && key == karpv1.NodeClassLabelKey(ref.GroupKind()) {
				values[ref.Name] = struct{}{}
			}
		}
		for _, n := range in.ExistingNodes {
			if v, ok := n.Labels[key]; ok {
				values[v] = struct{}{}
			}
		}
		s.topo.internValues(k, values)
	}
}
