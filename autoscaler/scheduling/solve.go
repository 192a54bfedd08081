package scheduling

import (
	"errors"
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
	d := newDims()
	d.add(corev1.ResourceList{corev1.ResourcePods: {}})
	pods := make([]*podInfo, 0, len(in.Pods))
	for _, pod := range in.Pods {
		if pod != nil {
			pods = append(pods, newPodInfo(pod))
		}
	}
	daemonSets := make([]*podInfo, 0, len(in.DaemonSetPods))
	for _, pod := range in.DaemonSetPods {
		if pod != nil {
			daemonSets = append(daemonSets, newPodInfo(pod))
		}
	}
	for _, pi := range append(append([]*podInfo(nil), pods...), daemonSets...) {
		d.add(pi.requests)
	}
	for _, np := range in.NodePools {
		d.add(np.Remaining)
	}
	for _, pi := range append(append([]*podInfo(nil), pods...), daemonSets...) {
		pi.vec = d.vector(pi.requests)
	}

	s := &solver{inFlight: newInFlight(in.InFlight, d)}
	for _, np := range orderNodePools(in.NodePools) {
		p := newPool(np, d) // step 1
		p.addDaemonSetOverhead(daemonSets)
		s.pools = append(s.pools, p)
	}

	result := Result{ExistingPlacements: map[string][]*corev1.Pod{}, Unschedulable: map[types.UID]error{}}
	sortForPacking(pods)
	for _, pi := range pods {
		if err := s.place(pi); err != nil { // steps 2 and 3
			result.Unschedulable[uid(pi.pod)] = err
		}
	}

	for _, n := range s.inFlight {
		if len(n.pods) > 0 {
			result.ExistingPlacements[n.node.Name] = n.pods
		}
	}
	for _, pl := range s.plans {
		result.NewNodeClaims = append(result.NewNodeClaims, pl.finish()) // step 4
	}
	return result
}

// solver holds the packing state of one Solve call.
type solver struct {
	inFlight []*inFlight
	pools    []*pool
	plans    []*plan
}

// newInFlight prepares the in-flight nodes, sorted by name.
func newInFlight(nodes []ExistingNode, d *dims) []*inFlight {
	out := make([]*inFlight, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, &inFlight{
			node:      n,
			k8sNode:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}},
			available: d.vector(n.Available),
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].node.Name < out[j].node.Name })
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

// place puts one pod (step 3): first-fit onto in-flight nodes, then onto
// open plans in the order they were opened, then onto a new plan of the
// first NodePool that can take it. It returns why no NodePool can.
func (s *solver) place(pi *podInfo) error {
	for _, n := range s.inFlight {
		if n.tryAdd(pi) {
			return nil
		}
	}
	for _, pl := range s.plans {
		f := pl.pool.fit(pi) // step 2, cached per pod signature
		for _, tf := range f.terms {
			if pl.tryAdd(pi, tf) {
				return nil
			}
		}
	}
	if len(s.pools) == 0 {
		return errors.New("no NodePool can launch a node for the pod: there are no NodePools")
	}
	var reasons []string
	for _, p := range s.pools {
		f := p.fit(pi)
		if f.err != nil {
			reasons = append(reasons, f.err.Error())
			continue
		}
		var termErrs []string
		for _, tf := range f.terms {
			pl, err := p.newPlan(pi, tf)
			if err == nil {
				s.plans = append(s.plans, pl)
				return nil
			}
			termErrs = append(termErrs, err.Error())
		}
		reasons = append(reasons, strings.Join(termErrs, "; "))
	}
	return errors.New(strings.Join(reasons, "; "))
}
