package bench

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// ReferenceResult is the packing of the reference algorithm.
type ReferenceResult struct {
	// InstanceType is the one type every node has.
	InstanceType string
	// Nodes is the node count; PriceUSDPerHour their total price at the
	// type's cheapest available offering.
	Nodes           int
	PriceUSDPerHour float64
}

// Reference packs pods first-fit decreasing (by cpu, then memory) onto
// nodes of a single instance type, ignoring every constraint but cpu,
// memory and pod count, and returns the cheapest such packing. It tries
// the five types with the lowest lower-bound cost (nodes needed by the
// scarcest resource times the cheapest offering) among those that hold the
// largest pod. Ignoring topology makes it optimistic for pods with
// hostname anti-affinity or spread; it is a yardstick, not an optimum.
func Reference(pods []*corev1.Pod, types []*cloudprovider.InstanceType) ReferenceResult {
	type req struct{ cpu, mem int64 }
	reqs := make([]req, len(pods))
	var sum req
	var largest req
	for i, p := range pods {
		rl := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		reqs[i] = req{rl.Cpu().MilliValue(), rl.Memory().Value()}
		sum.cpu, sum.mem = sum.cpu+reqs[i].cpu, sum.mem+reqs[i].mem
		largest.cpu, largest.mem = max(largest.cpu, reqs[i].cpu), max(largest.mem, reqs[i].mem)
	}
	sort.SliceStable(reqs, func(a, b int) bool {
		if reqs[a].cpu != reqs[b].cpu {
			return reqs[a].cpu > reqs[b].cpu
		}
		return reqs[a].mem > reqs[b].mem
	})
	type cand struct {
		it             *cloudprovider.InstanceType
		cpu, mem, pods int64
		price, bound   float64
	}
	var cands []cand
	for _, it := range types {
		price := math.Inf(1)
		for _, o := range it.Offerings {
			if o.Available {
				price = min(price, o.PriceUSDPerHour)
			}
		}
		c := cand{it: it, cpu: it.Allocatable.Cpu().MilliValue(), mem: it.Allocatable.Memory().Value(), pods: it.Allocatable.Pods().Value(), price: price}
		if math.IsInf(price, 1) || c.cpu < largest.cpu || c.mem < largest.mem || c.pods < 1 {
			continue
		}
		need := math.Max(math.Max(math.Ceil(float64(sum.cpu)/float64(c.cpu)), math.Ceil(float64(sum.mem)/float64(c.mem))), math.Ceil(float64(len(pods))/float64(c.pods)))
		c.bound = need * price
		cands = append(cands, c)
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].bound < cands[b].bound })
	best := ReferenceResult{PriceUSDPerHour: math.Inf(1)}
	for _, c := range cands[:min(5, len(cands))] {
		type node struct{ cpu, mem, pods int64 }
		var nodes []node
		for _, r := range reqs {
			placed := false
			for k := range nodes {
				n := &nodes[k]
				if n.cpu >= r.cpu && n.mem >= r.mem && n.pods >= 1 {
					n.cpu, n.mem, n.pods = n.cpu-r.cpu, n.mem-r.mem, n.pods-1
					placed = true
					break
				}
			}
			if !placed {
				nodes = append(nodes, node{c.cpu - r.cpu, c.mem - r.mem, c.pods - 1})
			}
		}
		if total := float64(len(nodes)) * c.price; total < best.PriceUSDPerHour {
			best = ReferenceResult{InstanceType: c.it.Name, Nodes: len(nodes), PriceUSDPerHour: total}
		}
	}
	return best
}
