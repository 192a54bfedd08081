package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// maxOfferings is how many offerings per instance type the scheduler looks
// at (one bit each in a uint64). A region has at most a handful of zones
// times three capacity types, far fewer; later offerings are ignored.
const maxOfferings = 64

// pool is one NodePool prepared for packing (pipeline step 1, candidates):
// the instance types that satisfy its requirements, each with the
// offerings that are available and satisfy them too.
type pool struct {
	nodePool *karpv1.NodePool
	name     string
	dims     *dims

	// types are the candidate instance types, in input order. offerings[i]
	// is a bitmask over types[i].Offerings of the usable ones;
	// capacity[i] and prices[i] are per type.
	types     []*cloudprovider.InstanceType
	offerings []uint64
	capacity  []vector
	prices    [][]float64

	// nameRank[i] is the position of types[i] by name (price ties).
	nameRank []int

	// typeKeys are the label keys instance types or offerings carry:
	// requirements on them filter offerings; requirements on any other key
	// (template labels, custom labels) are checked against requirements.
	typeKeys map[string]bool
	// requirements are the NodePool's requirements, its template labels,
	// karpenter.sh/nodepool and its node class label, by key.
	requirements requirementSet
	// abstract are the requirements on keys not in typeKeys: a new plan's
	// starting custom-label requirements.
	abstract requirementSet
	// minValues are the requirements with minValues, on typeKeys.
	minValues []requirement
	// taints are the template taints a pod must tolerate (startupTaints
	// never block a pod, nor does karpenter.sh/unregistered, which
	// registration removes).
	taints []corev1.Taint

	// overhead[i] is the requests of the DaemonSet pods that would run on
	// a new node of type types[i] (overheadList[i] as a ResourceList);
	// avail[i] is allocatable[i] minus overhead[i]: what pods can use.
	overhead     []vector
	overheadList []corev1.ResourceList
	avail        []vector

	// domains[k][i][o] is the domain index (zone, capacity type) of
	// offering o of types[i]; allValues[k] is the union over all types.
	domains   [keyHostname][][]int
	allValues [keyHostname]uint64

	// limited marks the resources spec.limits caps; remaining is
	// Remaining as a vector; used is the capacity already counted against
	// it by this Solve's plans.
	limited   []bool
	remaining vector
	used      vector
	hasLimits bool

	// relaxMinValues lets narrow accept candidates short of minValues
	// (MinValuesPolicy BestEffort, on the retry after strict placement
	// failed).
	relaxMinValues bool

	// err says why the NodePool cannot take any pod.
	err error
	// unavailable, when set, is why the NodePool may not launch nodes
	// (Input.UnavailableNodePools): it only explains pending pods.
	unavailable string
	// fits caches filter results by pod signature.
	fits map[string]*podFit

	// topo is the Solve call's topology; keyDomains caches typeDomains
	// per topology key.
	topo       *topology
	keyDomains map[int][]int

	// ledger is the Solve call's capacity reservation places (nil when
	// no NodePool has a reserved offering). reservedMask[i] marks the
	// offerings of types[i] in a reservation of the ledger and
	// reservationOf[i][o] is offering o's ledger index (reservations.go);
	// anyReserved is whether any type has one.
	ledger        *reservationLedger
	reservedMask  []uint64
	reservationOf [][]int
	anyReserved   bool
}

// newPool prepares one NodePool (step 1).
func newPool(in NodePoolInput, d *dims, t *topology, l *reservationLedger) *pool {
	np := in.NodePool
	p := &pool{
		ledger:       l,
		nodePool:     np,
		name:         np.Name,
		dims:         d,
		typeKeys:     map[string]bool{corev1.LabelInstanceTypeStable: true, corev1.LabelTopologyZone: true, karpv1.CapacityTypeLabelKey: true},
		requirements: requirementSet{},
		taints:       templateTaints(np.Spec.Template.Spec.Taints),
		fits:         map[string]*podFit{},
		topo:         t,
		limited:      make([]bool, len(d.names)),
		remaining:    make(vector, len(d.names)),
		used:         make(vector, len(d.names)),
	}
	switch {
	case np.Spec.Replicas != nil:
		// Karpenter v1.14 leaves static NodePools out of the provisioner's
		// scheduler (Provisioner.NewScheduler,
		// pkg/controllers/provisioning/provisioner.go): their NodeClaims
		// come from the static controller (autoscaler/controllers/nodepool/static),
		// and pods use their nodes as existing capacity.
		p.err = fmt.Errorf("NodePool %q is static (spec.replicas: %d): it keeps that many nodes and launches none for pending pods (scale it with kubectl scale nodepool %s --replicas=N)", p.name, *np.Spec.Replicas, p.name)
		return p
	case np.DeletionTimestamp != nil:
		p.err = fmt.Errorf("NodePool %q is being deleted", p.name)
		return p
	}
	for name, q := range in.Remaining {
		i, ok := d.index[name]
		if !ok {
			continue
		}
		// A limit no machine count could reach (memory: 1Ei) is unlimited.
		if v := amount(name, q); v < maxAmount {
			p.limited[i], p.remaining[i], p.hasLimits = true, v, true
		}
	}
	for _, it := range in.InstanceTypes {
		if it != nil {
			for k := range it.Labels {
				p.typeKeys[k] = true
			}
		}
	}
	if p.err = p.parseRequirements(); p.err != nil {
		return p
	}
	var concrete []requirement
	p.abstract = requirementSet{}
	for _, k := range p.requirements.SortedKeys() {
		r := p.requirements[k]
		switch {
		case p.typeKeys[k]:
			concrete = append(concrete, r)
			if r.MinValues > 0 {
				p.minValues = append(p.minValues, r)
			}
		case r.Empty():
			p.err = fmt.Errorf("NodePool %q can launch no node: %s contradict each other", p.name, r.Origin)
			return p
		default:
			p.abstract[k] = r
		}
	}
	p.addInstanceTypes(in.InstanceTypes, concrete, t)
	byName := make([]int, len(p.types))
	for i := range byName {
		byName[i] = i
	}
	sort.SliceStable(byName, func(a, b int) bool { return p.types[byName[a]].Name < p.types[byName[b]].Name })
	p.nameRank = make([]int, len(p.types))
	for rank, i := range byName {
		p.nameRank[i] = rank
	}
	if p.unavailable = in.unavailable; p.unavailable != "" {
		return p
	}
	if len(p.types) == 0 {
		p.err = p.explainNoTypes(in.InstanceTypes, concrete)
	}
	return p
}

// addInstanceTypes keeps the types that satisfy the NodePool's requirements
// on instance type and offering labels (concrete) with at least one
// available offering that does, and precomputes their vectors and prices.
func (p *pool) addInstanceTypes(types []*cloudprovider.InstanceType, concrete []requirement, t *topology) {
	nodesDim, countNodes := p.dims.index[resourceNodes]
	for _, it := range types {
		if it == nil {
			continue
		}
		mask := allowedOfferings(it, concrete, availableOfferings(it))
		if mask == 0 {
			continue
		}
		capacity := it.Capacity
		if capacity == nil {
			capacity = it.Allocatable
		}
		capVec := p.dims.vector(capacity)
		if countNodes {
			capVec[nodesDim] = 1 // one node
		}
		prices := make([]float64, len(it.Offerings))
		for i, o := range it.Offerings {
			prices[i] = o.PriceUSDPerHour
		}
		p.types = append(p.types, it)
		p.offerings = append(p.offerings, mask)
		p.addReservations(it, mask)
		p.capacity = append(p.capacity, capVec)
		p.prices = append(p.prices, prices)
		alloc := p.dims.vector(it.Allocatable)
		p.overhead = append(p.overhead, make(vector, len(p.dims.names)))
		p.overheadList = append(p.overheadList, corev1.ResourceList{})
		p.avail = append(p.avail, alloc)
		for k := range p.domains {
			doms := make([]int, len(it.Offerings))
			for o, off := range it.Offerings {
				doms[o] = t.valueIndex(k, offeringLabel(off, topologyKeys[k]))
				if o < maxOfferings && mask&(1<<o) != 0 && doms[o] >= 0 {
					p.allValues[k] |= 1 << doms[o]
				}
			}
			p.domains[k] = append(p.domains[k], doms)
		}
	}
}

// valuesOf returns the domain values of offering key k among the offerings
// in mask of types[i].
func (p *pool) valuesOf(k, i int, mask uint64) uint64 {
	var out uint64
	for o, d := range p.domains[k][i] {
		if o < maxOfferings && mask&(1<<o) != 0 && d >= 0 {
			out |= 1 << d
		}
	}
	return out
}

// offeringsIn returns the offerings of types[i] whose zone is in
// restrict[keyZone] and capacity type in restrict[keyCapacityType].
func (p *pool) offeringsIn(i int, restrict [keyHostname]uint64) uint64 {
	if restrict[keyZone] == allValues && restrict[keyCapacityType] == allValues {
		return allValues
	}
	var out uint64
	for o := range p.domains[keyZone][i] {
		if o >= maxOfferings {
			break
		}
		if inSet(restrict[keyZone], p.domains[keyZone][i][o]) && inSet(restrict[keyCapacityType], p.domains[keyCapacityType][i][o]) {
			out |= 1 << o
		}
	}
	return out
}

// inSet reports whether domain d is in set (an unknown domain is only in
// allValues).
func inSet(set uint64, d int) bool {
	if set == allValues {
		return true
	}
	return d >= 0 && d < maxDomainValues && set&(1<<d) != 0
}

// parseRequirements collects the NodePool's requirements, template labels,
// karpenter.sh/nodepool and node class label (as Karpenter's
// NodeClaimTemplate does) into p.requirements.
func (p *pool) parseRequirements() error {
	tmpl := p.nodePool.Spec.Template
	for _, e := range tmpl.Spec.Requirements {
		r, err := newRequirement(e.Key, e.Operator, e.Values, e.MinValues, "NodePool requirement "+describeExpression(e.Key, e.Operator, e.Values))
		if err != nil {
			return fmt.Errorf("NodePool %q has an invalid requirement: %w", p.name, err)
		}
		p.requirements.Add(r)
	}
	labels := map[string]string{karpv1.NodePoolLabelKey: p.name}
	if ref := tmpl.Spec.NodeClassRef; ref != nil {
		labels[karpv1.NodeClassLabelKey(ref.GroupKind())] = ref.Name
	}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r, _ := newRequirement(k, corev1.NodeSelectorOpIn, []string{labels[k]}, nil, fmt.Sprintf("NodePool label %s=%s", k, labels[k]))
		p.requirements.Add(r)
	}
	return nil
}

// explainNoTypes says why no instance type survived newPool's filter.
func (p *pool) explainNoTypes(all []*cloudprovider.InstanceType, concrete []requirement) error {
	if len(all) == 0 {
		return fmt.Errorf("NodePool %q has no instance types: its node class resolved none (check the EC2NodeClass status)", p.name)
	}
	for _, r := range concrete {
		if !anyTypeAllows(all, r) { // even counting unavailable offerings
			return fmt.Errorf("NodePool %q can launch no node: no instance type satisfies its %s", p.name, r.Origin)
		}
	}
	if full := fullUnavailableReservations(all, concrete); len(full) > 0 {
		return fmt.Errorf("NodePool %q can launch no node: the only offerings that satisfy its requirements are in capacity reservations that are full or expiring: %s "+
			"(the pod stays pending until a place frees; to fall back, allow on-demand or spot in the NodePool's karpenter.sh/capacity-type requirement)", p.name, strings.Join(full, ", "))
	}
	return fmt.Errorf("NodePool %q can launch no node: none of its %d instance types has an available offering that satisfies all its requirements together", p.name, len(all))
}

func anyTypeAllows(types []*cloudprovider.InstanceType, r requirement) bool {
	for _, it := range types {
		if it != nil && allowedOfferings(it, []requirement{r}, math.MaxUint64) != 0 {
			return true
		}
	}
	return false
}

// availableOfferings returns the bitmask of it's available offerings.
func availableOfferings(it *cloudprovider.InstanceType) uint64 {
	var mask uint64
	for i, o := range it.Offerings {
		if i < maxOfferings && o.Available {
			mask |= 1 << i
		}
	}
	return mask
}

// isOfferingKey reports whether key is set per offering rather than per
// instance type.
func isOfferingKey(key string) bool {
	return key == corev1.LabelTopologyZone || key == karpv1.CapacityTypeLabelKey
}

// typeLabel returns the value of label key on nodes of type it.
func typeLabel(it *cloudprovider.InstanceType, key string) (string, bool) {
	if v, ok := it.Labels[key]; ok {
		return v, true
	}
	if key == corev1.LabelInstanceTypeStable {
		return it.Name, true
	}
	return "", false
}

// offeringLabel returns the value of an offering label (zone or capacity
// type) of o.
func offeringLabel(o cloudprovider.Offering, key string) string {
	if key == corev1.LabelTopologyZone {
		return o.Zone
	}
	return o.CapacityType
}

// allowedOfferings returns the offerings in mask of type it that satisfy
// every requirement in reqs (all on instance type or offering labels), or 0
// when the type itself does not.
func allowedOfferings(it *cloudprovider.InstanceType, reqs []requirement, mask uint64) uint64 {
	for _, r := range reqs {
		if !isOfferingKey(r.Key) {
			v, ok := typeLabel(it, r.Key)
			if !r.Allows(v, ok) {
				return 0
			}
		}
	}
	for i, o := range it.Offerings {
		if i >= maxOfferings || mask&(1<<i) == 0 {
			continue
		}
		for _, r := range reqs {
			if isOfferingKey(r.Key) && !r.Allows(offeringLabel(o, r.Key), true) {
				mask &^= 1 << i
				break
			}
		}
	}
	return mask
}

// cheapestPrice returns the lowest price among the offerings in mask of
// p.types[i], or +Inf.
func (p *pool) cheapestPrice(i int, mask uint64) float64 {
	best := math.Inf(1)
	for k, price := range p.prices[i] {
		if k < maxOfferings && mask&(1<<k) != 0 && price < best {
			best = price
		}
	}
	return best
}

// templateTaints returns taints without karpenter.sh/unregistered: a new
// node loses it when it registers, so it never keeps a pod off a plan.
func templateTaints(taints []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key != karpv1.UnregisteredTaintKey {
			out = append(out, t)
		}
	}
	return out
}
