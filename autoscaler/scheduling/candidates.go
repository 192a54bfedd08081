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
	// allocatable[i], capacity[i] and prices[i] are per type.
	types       []*cloudprovider.InstanceType
	offerings   []uint64
	allocatable []vector
	capacity    []vector
	prices      [][]float64

	// typeKeys are the label keys instance types or offerings carry:
	// requirements on them filter offerings; requirements on any other key
	// (template labels, custom labels) are checked against requirements.
	typeKeys map[string]bool
	// requirements are the NodePool's requirements, its template labels,
	// karpenter.sh/nodepool and its node class label, by key.
	requirements requirementSet
	// minValues are the requirements with minValues, on typeKeys.
	minValues []requirement
	// taints are the template taints a pod must tolerate (startupTaints
	// never block a pod).
	taints []corev1.Taint

	// overhead is the DaemonSet pods' requests every new node carries.
	overhead    corev1.ResourceList
	overheadVec vector

	// limited marks the resources spec.limits caps; remaining is
	// Remaining as a vector; used is the capacity already counted against
	// it by this Solve's plans.
	limited   []bool
	remaining vector
	used      vector
	hasLimits bool

	// err says why the NodePool cannot take any pod.
	err error
	// fits caches filter results by pod signature.
	fits map[string]*podFit
}

// newPool prepares one NodePool (step 1).
func newPool(in NodePoolInput, d *dims) *pool {
	np := in.NodePool
	p := &pool{
		nodePool:     np,
		name:         np.Name,
		dims:         d,
		typeKeys:     map[string]bool{corev1.LabelInstanceTypeStable: true, corev1.LabelTopologyZone: true, karpv1.CapacityTypeLabelKey: true},
		requirements: requirementSet{},
		taints:       np.Spec.Template.Spec.Taints,
		fits:         map[string]*podFit{},
		limited:      make([]bool, len(d.names)),
		remaining:    make(vector, len(d.names)),
		used:         make(vector, len(d.names)),
		overhead:     corev1.ResourceList{},
		overheadVec:  make(vector, len(d.names)),
	}
	switch {
	case np.Spec.Replicas != nil:
		p.err = fmt.Errorf("NodePool %q is static (spec.replicas is set) and does not launch nodes for pending pods", p.name)
		return p
	case np.DeletionTimestamp != nil:
		p.err = fmt.Errorf("NodePool %q is being deleted", p.name)
		return p
	}
	for name, q := range in.Remaining {
		if i, ok := d.index[name]; ok {
			p.limited[i], p.remaining[i], p.hasLimits = true, q.MilliValue(), true
		}
	}
	for _, it := range in.InstanceTypes {
		for k := range it.Labels {
			p.typeKeys[k] = true
		}
	}
	if p.err = p.parseRequirements(); p.err != nil {
		return p
	}
	var concrete []requirement
	for _, k := range p.requirements.sortedKeys() {
		r := p.requirements[k]
		if p.typeKeys[k] {
			concrete = append(concrete, r)
			if r.minValues > 0 {
				p.minValues = append(p.minValues, r)
			}
		} else if r.empty() {
			p.err = fmt.Errorf("NodePool %q can launch no node: %s contradict each other", p.name, r.origin)
			return p
		}
	}
	nodesDim, countNodes := d.index[resourceNodes]
	for _, it := range in.InstanceTypes {
		mask := allowedOfferings(it, concrete, availableOfferings(it))
		if mask == 0 {
			continue
		}
		capacity := it.Capacity
		if capacity == nil {
			capacity = it.Allocatable
		}
		capVec := d.vector(capacity)
		if countNodes {
			capVec[nodesDim] = 1000 // one node, in milli-units
		}
		prices := make([]float64, len(it.Offerings))
		for i, o := range it.Offerings {
			prices[i] = o.PriceUSDPerHour
		}
		p.types = append(p.types, it)
		p.offerings = append(p.offerings, mask)
		p.allocatable = append(p.allocatable, d.vector(it.Allocatable))
		p.capacity = append(p.capacity, capVec)
		p.prices = append(p.prices, prices)
	}
	if len(p.types) == 0 {
		p.err = p.explainNoTypes(in.InstanceTypes, concrete)
	}
	return p
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
		p.requirements.add(r)
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
		p.requirements.add(r)
	}
	return nil
}

// explainNoTypes says why no instance type survived newPool's filter.
func (p *pool) explainNoTypes(all []*cloudprovider.InstanceType, concrete []requirement) error {
	if len(all) == 0 {
		return fmt.Errorf("NodePool %q has no instance types: its node class resolved none (check the EC2NodeClass status)", p.name)
	}
	for _, r := range concrete {
		if !anyTypeAllows(all, r) {
			return fmt.Errorf("NodePool %q can launch no node: no instance type satisfies its %s", p.name, r.origin)
		}
	}
	return fmt.Errorf("NodePool %q can launch no node: none of its %d instance types has an available offering that satisfies all its requirements together", p.name, len(all))
}

func anyTypeAllows(types []*cloudprovider.InstanceType, r requirement) bool {
	for _, it := range types {
		if allowedOfferings(it, []requirement{r}, availableOfferings(it)) != 0 {
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
		if !isOfferingKey(r.key) {
			v, ok := typeLabel(it, r.key)
			if !r.allows(v, ok) {
				return 0
			}
		}
	}
	for i, o := range it.Offerings {
		if i >= maxOfferings || mask&(1<<i) == 0 {
			continue
		}
		for _, r := range reqs {
			if isOfferingKey(r.key) && !r.allows(offeringLabel(o, r.key), true) {
				mask &^= 1 << i
				break
			}
		}
	}
	return mask
}

// podFit is the filter result (pipeline step 2) for one pod signature and
// one NodePool: the pod's terms the NodePool can satisfy, or why none.
type podFit struct {
	terms []*termFit
	err   error
}

// termFit is one pod term the NodePool can satisfy.
type termFit struct {
	// exprs are the term's expressions (for the NodeClaim requirements).
	exprs []requirement
	// abstract are the expressions on keys instance types do not carry;
	// a plan intersects them with its other pods' so they stay satisfiable.
	abstract []requirement
	// masks[i] are the offerings of pool.types[i] the term accepts.
	masks []uint64
}

// fit filters the NodePool's candidates for a pod (step 2), cached by the
// pod's signature.
func (p *pool) fit(pi *podInfo) *podFit {
	if f, ok := p.fits[pi.signature]; ok {
		return f
	}
	f := p.computeFit(pi)
	p.fits[pi.signature] = f
	return f
}

func (p *pool) computeFit(pi *podInfo) *podFit {
	if p.err != nil {
		return &podFit{err: p.err}
	}
	if t, blocked := blockingTaint(p.taints, pi.pod.Spec.Tolerations); blocked {
		return &podFit{err: fmt.Errorf("incompatible with NodePool %q: taint %s not tolerated (add a toleration to the pod or use another NodePool)", p.name, describeTaint(t))}
	}
	if pi.termsErr != nil {
		return &podFit{err: fmt.Errorf("incompatible with NodePool %q: %w", p.name, pi.termsErr)}
	}
	f := &podFit{}
	var errs []string
	for _, term := range pi.terms {
		tf, err := p.fitTerm(term)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		f.terms = append(f.terms, tf)
	}
	switch {
	case len(f.terms) > 0:
	case len(errs) == 1:
		f.err = fmt.Errorf("%s", errs[0])
	default:
		for i := range errs {
			errs[i] = fmt.Sprintf("term %d: %s", i+1, errs[i])
		}
		f.err = fmt.Errorf("none of the pod's %d node affinity terms fits NodePool %q: %s", len(errs), p.name, strings.Join(errs, "; "))
	}
	return f
}

// fitTerm checks one pod term against the NodePool: expressions on custom
// labels against the NodePool's requirements and labels, expressions on
// instance type and offering labels against every candidate offering.
func (p *pool) fitTerm(term podTerm) (*termFit, error) {
	tf := &termFit{exprs: term.exprs}
	var concrete []requirement
	for _, e := range term.exprs {
		if p.typeKeys[e.key] {
			concrete = append(concrete, e)
			continue
		}
		if pr, defined := p.requirements[e.key]; defined {
			if pr.intersect(e).empty() {
				return nil, fmt.Errorf("incompatible with NodePool %q: %s conflicts with %s", p.name, e.origin, pr.origin)
			}
		} else if !e.allowAbsent && !karpv1.WellKnownLabels.Has(e.key) {
			return nil, fmt.Errorf("incompatible with NodePool %q: %s needs label %s, which the NodePool neither sets in spec.template.metadata.labels nor allows in spec.template.spec.requirements", p.name, e.origin, e.key)
		}
		tf.abstract = append(tf.abstract, e)
	}
	tf.masks = make([]uint64, len(p.types))
	found := false
	for i, it := range p.types {
		tf.masks[i] = allowedOfferings(it, concrete, p.offerings[i])
		found = found || tf.masks[i] != 0
	}
	if !found {
		return nil, p.explainNoMatch(concrete)
	}
	return tf, nil
}

// explainNoMatch names the pod expression no candidate satisfies, with the
// NodePool requirement on the same key when there is one.
func (p *pool) explainNoMatch(concrete []requirement) error {
	for _, e := range concrete {
		ok := false
		for i, it := range p.types {
			if allowedOfferings(it, []requirement{e}, p.offerings[i]) != 0 {
				ok = true
				break
			}
		}
		if ok {
			continue
		}
		what := "instance type"
		if isOfferingKey(e.key) {
			what = "available offering"
		}
		hint := ""
		if pr, ok := p.requirements[e.key]; ok {
			hint = fmt.Sprintf(" (the NodePool allows %s)", strings.TrimPrefix(pr.origin, "NodePool requirement "))
		}
		return fmt.Errorf("no %s in NodePool %q satisfies %s%s", what, p.name, e.origin, hint)
	}
	origins := make([]string, len(concrete))
	for i, e := range concrete {
		origins[i] = e.origin
	}
	return fmt.Errorf("no instance type in NodePool %q satisfies %s together", p.name, strings.Join(origins, ", "))
}

// addDaemonSetOverhead adds the requests of every DaemonSet pod that would
// run on this NodePool's nodes: it tolerates the template taints and some
// candidate offering satisfies one of its terms. The check is per NodePool,
// not per instance type, as in Karpenter.
func (p *pool) addDaemonSetOverhead(daemonSets []*podInfo) {
	if p.err != nil {
		return
	}
	for _, ds := range daemonSets {
		if f := p.computeFit(ds); f.err == nil {
			p.overhead = addResourceLists(p.overhead, ds.requests)
			p.overheadVec = p.overheadVec.plus(ds.vec)
		}
	}
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
