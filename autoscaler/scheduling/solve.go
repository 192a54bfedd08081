package scheduling

import (
	"errors"
	"math/bits"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Solve decides where the pending pods go: onto in-flight nodes, onto new
// NodeClaims, or nowhere (with a reason). It is a pure function of in:
// the same input gives the same Result, and nothing in in is modified.
//
// The pipeline, one function per step:
//
//  1. candidates (newPool): per NodePool, the instance types and available
//     offerings that satisfy its requirements and template labels;
//  2. filter (pool.fit): per pod and NodePool, the pod's taint tolerations,
//     nodeSelector and required node affinity narrow the candidates;
//  3. pack (place): pods sorted by decreasing cpu then memory go first-fit
//     onto in-flight nodes, then open plans, then a new plan on the first
//     NodePool (by weight, then name) that can take them;
//  4. price (plan.finish): each plan's types ordered by their cheapest
//     compatible offering, capped at MaxInstanceTypes, and turned into
//     NodeClaim requirements.
func Solve(in Input) Result {
	s := &solver{topo: newTopology(in.NamespaceLabels), bestEffort: in.MinValuesPolicy == MinValuesPolicyBestEffort}
	var todo []pending
	for _, pod := range in.Pods {
		if pod != nil {
			todo = append(todo, pending{pod: pod, variants: variants(pod)})
		}
	}
	daemonSets := make([]*podInfo, 0, len(in.DaemonSetPods))
	for _, pod := range in.DaemonSetPods {
		if pod != nil {
			daemonSets = append(daemonSets, newPodInfo(pod, pod, nil))
		}
	}
	s.registerTopology(in, todo)
	pods, d := s.podInfos(in, todo, daemonSets)
	s.existing = s.newExisting(in.ExistingNodes, d)
	s.ledger = newReservationLedger(in)
	s.addPools(in, d, daemonSets) // step 1

	result := Result{ExistingPlacements: map[string][]*corev1.Pod{}, Unschedulable: map[types.UID]error{}}
	variantsOf := make(map[*podInfo][]*corev1.Pod, len(pods))
	for i, pi := range pods {
		variantsOf[pi] = todo[i].variants
	}
	sortForPacking(pods)
	for _, pi := range pods {
		if err := s.placeVariants(pi, variantsOf[pi], in.VolumeRequirements); err != nil { // steps 2 and 3
			result.Unschedulable[uid(pi.pod)] = err
		}
	}

	for _, n := range s.existing {
		if len(n.pods) > 0 {
			result.ExistingPlacements[n.node.Name] = n.pods
		}
	}
	for _, pl := range s.plans {
		result.NewNodeClaims = append(result.NewNodeClaims, pl.finish()) // step 4
	}
	return result
}

// pending is a pod Solve places, with its relaxation variants; the
// strictest variant first.
type pending struct {
	pod      *corev1.Pod
	variants []*corev1.Pod
}

// registerTopology registers the groups (and topology keys) of every
// constraint of pending and existing pods, then interns the values of
// every key in sorted order, so that each pod's counted groups and every
// domain are known before the first placement.
func (s *solver) registerTopology(in Input, todo []pending) {
	defer s.internDomains(in)
	for _, t := range todo {
		s.topo.podConstraints(t.variants[0])
	}
	for _, n := range in.ExistingNodes {
		for _, pod := range n.Pods {
			if pod != nil {
				s.topo.podConstraints(pod)
			}
		}
	}
}

// podInfos returns the podInfo of each pending pod (in todo's order) and
// the resource dimensions of every request and NodePool limit, with each
// pod's and DaemonSet pod's request vector set.
func (s *solver) podInfos(in Input, todo []pending, daemonSets []*podInfo) ([]*podInfo, *dims) {
	d := newDims()
	d.add(corev1.ResourceList{corev1.ResourcePods: {}})
	pods := make([]*podInfo, 0, len(todo))
	for _, t := range todo {
		pi := s.newPodInfo(t.pod, t.variants[0], in.VolumeRequirements)
		pods = append(pods, pi)
		d.add(pi.requests)
	}
	for _, pi := range daemonSets {
		d.add(pi.requests)
	}
	for _, np := range in.NodePools {
		d.add(np.Remaining)
	}
	for _, pi := range append(append([]*podInfo(nil), pods...), daemonSets...) {
		pi.vec = d.vector(pi.requests)
	}
	return pods, d
}

// addPools builds a pool per NodePool (by weight, then name) with its
// DaemonSet overhead, and one per unavailable NodePool, which only
// explains unschedulable pods.
func (s *solver) addPools(in Input, d *dims, daemonSets []*podInfo) {
	for _, np := range orderNodePools(in.NodePools) {
		p := newPool(np, d, s.topo, s.ledger)
		p.addDaemonSetOverhead(daemonSets)
		s.pools = append(s.pools, p)
	}
	for _, u := range in.UnavailableNodePools {
		if u.NodePool == nil {
			continue
		}
		reason := u.Reason
		if reason == "" {
			reason = "it is not available"
		}
		s.unavailable = append(s.unavailable, newPool(NodePoolInput{NodePool: u.NodePool, unavailable: reason}, d, s.topo, nil))
	}
}

// solver holds the packing state of one Solve call.
type solver struct {
	topo     *topology
	existing []*existing
	pools    []*pool
	// unavailable are Input.UnavailableNodePools: never planned on, they
	// only explain unschedulable pods.
	unavailable []*pool
	plans       []*plan
	// hosts counts hostname domains handed out (existing nodes, then
	// plans).
	hosts int
	// bestEffort is MinValuesPolicy BestEffort.
	bestEffort bool
	// ledger counts capacity reservation places (nil: none offered).
	ledger *reservationLedger
}

// placeRelaxingMinValues retries a pod that fits nowhere with minValues
// relaxed (MinValuesPolicy BestEffort), and reports whether it fit.
func (s *solver) placeRelaxingMinValues(pi *podInfo) bool {
	for _, p := range s.pools {
		p.relaxMinValues = true
	}
	defer func() {
		for _, p := range s.pools {
			p.relaxMinValues = false
		}
	}()
	return s.place(pi, false) == nil
}

// newHost returns a new hostname domain index.
func (s *solver) newHost() int {
	s.hosts++
	return s.hosts - 1
}

// newPodInfo builds the podInfo of one variant of pod, with its topology
// constraints and the groups that count it.
func (s *solver) newPodInfo(pod, view *corev1.Pod, vol map[types.UID][]corev1.NodeSelectorRequirement) *podInfo {
	pi := newPodInfo(pod, view, vol[pod.UID])
	pi.constraints = s.topo.podConstraints(view)
	pi.counted = s.topo.matchGroups(pod)
	pi.owns = s.topo.ownedAntiAffinity(pod)
	return pi
}

// internDomains registers every zone and capacity type the NodePools'
// offerings and the existing nodes' labels name.
func (s *solver) internDomains(in Input) {
	for k := range keyHostname {
		values := map[string]struct{}{}
		for _, np := range in.NodePools {
			for _, it := range np.InstanceTypes {
				if it == nil {
					continue
				}
				for _, o := range it.Offerings {
					values[offeringLabel(o, topologyKeys[k])] = struct{}{}
				}
			}
		}
		for _, n := range in.ExistingNodes {
			if v, ok := n.Labels[topologyKeys[k]]; ok {
				values[v] = struct{}{}
			}
		}
		s.topo.internValues(k, values)
	}
	s.internExtraDomains(in)
}

// newExisting prepares the existing nodes, sorted by name, and counts
// their pods in the topology groups.
func (s *solver) newExisting(nodes []ExistingNode, d *dims) []*existing {
	out := make([]*existing, 0, len(nodes))
	for _, n := range nodes {
		e := &existing{
			node:      n,
			k8sNode:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}},
			available: d.vector(n.Available),
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].node.Name < out[j].node.Name })
	for _, e := range out {
		e.dom.fixed[keyHostname] = s.newHost()
		for k := range keyHostname {
			e.dom.fixed[k] = -1
			if v, ok := e.node.Labels[topologyKeys[k]]; ok {
				e.dom.fixed[k] = s.topo.valueIndex(k, v)
			}
		}
		if n := len(s.topo.keys) - numTopologyKeys; n > 0 {
			e.dom.extra = make([]int, n)
			for x := range e.dom.extra {
				e.dom.extra[x] = -1
				if v, ok := e.node.Labels[s.topo.keys[numTopologyKeys+x]]; ok {
					e.dom.extra[x] = s.topo.valueIndex(numTopologyKeys+x, v)
				}
			}
		}
		for _, pod := range e.node.Pods {
			if pod == nil {
				continue
			}
			e.ports = e.ports.add(podHostPorts(pod))
			s.topo.record(&podInfo{pod: pod, counted: s.topo.matchGroups(pod), owns: s.topo.ownedAntiAffinity(pod)}, &e.dom)
		}
	}
	return out
}

// orderNodePools returns the usable inputs by descending spec.weight (unset
// is 0, as in Karpenter), then by name.
func orderNodePools(in []NodePoolInput) []NodePoolInput {
	out := make([]NodePoolInput, 0, len(in))
	for _, np := range in {
		if np.NodePool != nil {
			out = append(out, np)
		}
	}
	weight := func(np NodePoolInput) int32 {
		if w := np.NodePool.Spec.Weight; w != nil {
			return *w
		}
		return 0
	}
	sort.SliceStable(out, func(i, j int) bool {
		if wi, wj := weight(out[i]), weight(out[j]); wi != wj {
			return wi > wj
		}
		return out[i].NodePool.Name < out[j].NodePool.Name
	})
	return out
}

// placeVariants places the pod as its strictest variant that fits (see
// variants), and returns the error of the last (least strict) variant when
// none does.
func (s *solver) placeVariants(pi *podInfo, views []*corev1.Pod, vol map[types.UID][]corev1.NodeSelectorRequirement) error {
	var err error
	for i, v := range views {
		if i > 0 {
			next := s.newPodInfo(pi.pod, v, vol)
			next.vec = pi.vec
			pi = next
		}
		if err = s.place(pi, true); err == nil {
			return nil
		}
		if pi.hasCountedSpread() {
			if err2 := s.place(pi, false); err2 == nil {
				return nil
			}
		}
		if s.bestEffort {
			if s.placeRelaxingMinValues(pi) {
				return nil
			}
		}
	}
	return err
}

// place puts one pod (step 3): first-fit onto existing nodes, then onto
// open plans in the order they were opened, then onto a new plan of the
// first NodePool that can take it. It returns why no NodePool can.
func (s *solver) place(pi *podInfo, strict bool) error {
	plc := s.prepare(pi, strict)
	for _, n := range s.existing {
		if n.tryAdd(pi, plc) {
			s.topo.record(pi, &n.dom)
			return nil
		}
	}
	var (
		lastPool *pool
		f        *podFit
	)
	for _, pl := range s.plans {
		if !pl.mayTake(pi, plc) {
			continue
		}
		if pl.pool != lastPool {
			lastPool, f = pl.pool, pl.pool.fit(pi) // step 2, cached per pod signature
		}
		for _, tf := range f.terms {
			if pl.tryAdd(pi, tf, plc) {
				d := pl.domains()
				s.topo.record(pi, &d)
				return nil
			}
		}
	}
	if len(s.pools) == 0 && len(s.unavailable) == 0 {
		return errors.New("no NodePool can launch a node for the pod: there are no NodePools")
	}
	// Reasons by rank: the NodePools that could take the pod but for
	// their own state first, those that do not fit the pod last.
	var reasons [rankIncompatible + 1][]string
	for _, p := range s.pools {
		f := p.fit(pi)
		if f.err != nil {
			reasons[f.rank] = append(reasons[f.rank], f.err.Error())
			continue
		}
		var termErrs []string
		for _, tf := range f.terms {
			pl, err := s.newPlan(p, pi, tf, plc)
			if err == nil {
				s.plans = append(s.plans, pl)
				d := pl.domains()
				s.topo.record(pi, &d)
				return nil
			}
			termErrs = append(termErrs, err.Error())
		}
		reasons[rankPoolCause] = append(reasons[rankPoolCause], strings.Join(termErrs, "; "))
	}
	// Within a rank, unavailable NodePools go first: one the pod fits is
	// usually the NodePool the pod was meant for.
	var unavailable [rankIncompatible + 1][]string
	for _, p := range s.unavailable {
		f := p.fit(pi)
		unavailable[f.rank] = append(unavailable[f.rank], f.err.Error())
	}
	var all []string
	for rank := range reasons {
		all = append(append(all, unavailable[rank]...), reasons[rank]...)
	}
	return errors.New(strings.Join(all, "; "))
}

// domains returns the plan's domain per topology key: its hostname, its
// zone and capacity type when its candidates offer exactly one, and its
// domain of every other key when it has exactly one (-1 otherwise).
func (pl *plan) domains() nodeDomains {
	dom := nodeDomains{fixed: [numTopologyKeys]int{-1, -1, pl.host}}
	for k := range keyHostname {
		if v := pl.values[k]; v != 0 && v&(v-1) == 0 {
			dom.fixed[k] = bits.TrailingZeros64(v)
		}
	}
	dom.extra = pl.extraDomains()
	return dom
}
