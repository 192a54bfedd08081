package scheduling

import (
	"cmp"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// finish prices a plan and turns it into a NodeClaimPlan (step 4): the
// candidate types ordered by their cheapest compatible available offering
// (ties by name), capped at MaxInstanceTypes while keeping minValues, and
// the requirements narrowed to what those types and offerings allow.
func (pl *plan) finish() NodeClaimPlan {
	p := pl.pool
	type option struct {
		i     int
		price float64
	}
	// Indexed by type (slices, not maps: finish runs once per plan and
	// was a fifth of Solve's time with maps).
	opts := make([]option, len(pl.types))
	mask := make([]uint64, len(p.types))
	for k, i := range pl.types {
		opts[k] = option{i, p.cheapestPrice(i, pl.masks[k])}
		mask[i] = pl.masks[k]
	}
	slices.SortFunc(opts, func(a, b option) int { // names are unique: a total order
		if c := cmp.Compare(a.price, b.price); c != 0 {
			return c
		}
		return cmp.Compare(p.nameRank[a.i], p.nameRank[b.i])
	})
	order := make([]int, len(opts))
	price := make([]float64, len(p.types))
	for k, o := range opts {
		order[k] = o.i
		price[o.i] = o.price
	}
	order = p.truncate(order, mask)

	out := NodeClaimPlan{NodePool: p.nodePool, PriceUSDPerHour: price[order[0]], Reservations: pl.heldIDs()}
	requests := []corev1.ResourceList{p.minOverhead(order)}
	for _, pi := range pl.pods {
		out.Pods = append(out.Pods, pi.pod)
		requests = append(requests, pi.requests)
	}
	out.Requests = addResourceLists(requests...)

	names := make([]string, len(order))
	zones, capacityTypes := map[string]struct{}{}, map[string]struct{}{}
	for k, i := range order {
		out.InstanceTypes = append(out.InstanceTypes, p.types[i])
		names[k] = p.types[i].Name
		for _, z := range p.values(corev1.LabelTopologyZone, i, mask[i]) {
			zones[z] = struct{}{}
		}
		for _, c := range p.values(karpv1.CapacityTypeLabelKey, i, mask[i]) {
			capacityTypes[c] = struct{}{}
		}
	}
	out.Requirements = pl.requirements(names, zones, capacityTypes)
	// BestEffort minValues: lower each minValues the kept types cannot
	// meet to the number of values they offer.
	for _, r := range p.minValues {
		kept := candidates{types: order, masks: make([]uint64, len(order))}
		for k, i := range order {
			kept.masks[k] = mask[i]
		}
		n := len(p.distinctValues(r.Key, kept, 0))
		if n >= r.MinValues {
			continue
		}
		out.MinValuesRelaxed = true
		for k := range out.Requirements {
			if e := &out.Requirements[k]; e.Key == r.Key && e.MinValues != nil && *e.MinValues > n {
				e.MinValues = &n
			}
		}
	}
	return out
}

// truncate keeps at most MaxInstanceTypes of order (cheapest first). For
// each requirement with minValues it first keeps the cheapest type of each
// new value until minValues distinct values are kept, so the cap never
// breaks minValues, then fills up with the cheapest remaining types.
func (p *pool) truncate(order []int, mask []uint64) []int {
	if len(order) <= MaxInstanceTypes {
		return order
	}
	keep := make([]bool, len(p.types))
	kept := 0
	for _, r := range p.minValues {
		seen := map[string]struct{}{}
		for _, i := range order {
			if len(seen) >= r.MinValues {
				break
			}
			for _, v := range p.values(r.Key, i, mask[i]) {
				if _, ok := seen[v]; !ok {
					seen[v] = struct{}{}
					if !keep[i] {
						keep[i] = true
						kept++
					}
				}
			}
		}
	}
	for _, i := range order {
		if kept >= MaxInstanceTypes {
			break
		}
		if !keep[i] {
			keep[i] = true
			kept++
		}
	}
	out := make([]int, 0, kept)
	for _, i := range order {
		if keep[i] {
			out = append(out, i)
		}
	}
	return out
}

// requirements returns the NodeClaim requirements of the plan, sorted by
// key: the NodePool's requirements and labels intersected with every pod
// term the plan used, with instance type, zone and capacity type replaced
// by the values the kept types and offerings allow (instance types in
// price order).
func (pl *plan) requirements(instanceTypes []string, zones, capacityTypes map[string]struct{}) []karpv1.NodeSelectorRequirementWithMinValues {
	merged := pl.pool.requirements.Copy()
	for _, r := range pl.pins {
		// The topology domains of custom label keys the plan was pinned
		// to (topology_keys.go).
		merged.Add(r)
	}
	for _, tf := range pl.terms {
		for _, e := range tf.exprs {
			merged.Add(e)
		}
	}
	narrowed := map[string][]string{
		corev1.LabelInstanceTypeStable: instanceTypes,
		corev1.LabelTopologyZone:       sortedKeys(zones),
		karpv1.CapacityTypeLabelKey:    sortedKeys(capacityTypes),
	}
	var out []karpv1.NodeSelectorRequirementWithMinValues
	for key, values := range narrowed {
		e := karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
		if mv := merged[key].MinValues; mv > 0 {
			e.MinValues = &mv
		}
		out = append(out, e)
		delete(merged, key)
	}
	for _, key := range merged.SortedKeys() {
		out = append(out, merged[key].Expressions()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// minOverhead returns, per resource, the smallest DaemonSet overhead among
// the types in order: the NodeClaim's requests then fit every one of them.
func (p *pool) minOverhead(order []int) corev1.ResourceList {
	if !p.hasOverhead() {
		return nil
	}
	least := append(vector(nil), p.overhead[order[0]]...)
	for _, i := range order[1:] {
		for d, v := range p.overhead[i] {
			least[d] = min(least[d], v)
		}
	}
	out := corev1.ResourceList{}
	for d, name := range p.dims.names {
		if least[d] > 0 {
			out[name] = *quantity(name, least[d])
		}
	}
	return out
}
