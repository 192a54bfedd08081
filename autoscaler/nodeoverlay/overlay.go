package nodeoverlay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/requirements"
)

// Reasons of the ValidationSucceeded condition when it is False, as
// Karpenter's nodeoverlay controller writes them (sigs.k8s.io/karpenter
// v1.14.0 pkg/controllers/nodeoverlay/controller.go).
const (
	// ReasonRuntimeValidation: the overlay fails validation the CRD's
	// schema cannot express (a restricted requirement key, a well-known
	// resource such as cpu in spec.capacity, an unparsable price).
	ReasonRuntimeValidation = "RuntimeValidation"
	// ReasonConflict: an overlay of the same weight already sets the price
	// of an offering, or a resource of an instance type, this one selects.
	ReasonConflict = "Conflict"
)

// Overlay is a validated NodeOverlay, ready to match instance types.
type Overlay struct {
	// Name is the NodeOverlay's metadata.name.
	Name string
	// Weight is spec.weight (0 when unset).
	Weight int32
	// Price is spec.price or, when that is unset, spec.priceAdjustment;
	// empty when the overlay changes no price.
	Price string
	// Capacity is spec.capacity: extended resources added to the instance
	// type's capacity and allocatable.
	Capacity corev1.ResourceList

	reqs requirements.Requirements
}

// Compile validates o as Karpenter's NodeOverlay.RuntimeValidate does
// (requirement keys and values, no well-known resource in spec.capacity)
// and checks what the CRD's schema checks on the price fields (one of
// them, in the documented formats), so a NodeOverlay created without the
// schema never panics the evaluation. It returns the error naming the
// field.
func Compile(ctx context.Context, o *v1alpha1.NodeOverlay) (Overlay, error) {
	var errs []error
	if err := o.RuntimeValidate(ctx); err != nil {
		errs = append(errs, err)
	}
	if o.Spec.Price != nil && o.Spec.PriceAdjustment != nil {
		errs = append(errs, errors.New("spec.price and spec.priceAdjustment are both set; keep one"))
	}
	price := ""
	switch {
	case o.Spec.Price != nil:
		price = *o.Spec.Price
		if _, err := parsePrice(price); err != nil || strings.HasPrefix(price, "+") || strings.HasPrefix(price, "-") {
			errs = append(errs, fmt.Errorf("spec.price %q: want a non-negative decimal such as \"0.42\" (USD per hour)", price))
		}
	case o.Spec.PriceAdjustment != nil:
		price = *o.Spec.PriceAdjustment
		if _, err := AdjustPrice(1, price); err != nil || !(strings.HasPrefix(price, "+") || strings.HasPrefix(price, "-")) {
			errs = append(errs, fmt.Errorf("spec.priceAdjustment %q: want a signed amount (\"+0.5\", \"-0.1\") or percentage (\"+10%%\", \"-20%%\", at most -100%%)", price))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Overlay{}, err
	}
	exprs := make([]corev1.NodeSelectorRequirement, 0, len(o.Spec.Requirements))
	for _, r := range o.Spec.Requirements {
		exprs = append(exprs, r.AsNodeSelectorRequirement())
	}
	weight := int32(0)
	if o.Spec.Weight != nil {
		weight = *o.Spec.Weight
	}
	return Overlay{Name: o.Name, Weight: weight, Price: price, Capacity: o.Spec.Capacity, reqs: requirements.Parse(exprs)}, nil
}

// parsePrice parses an unsigned decimal price in USD per hour.
func parsePrice(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || strings.ContainsAny(s, "eEnNiI") {
		return 0, fmt.Errorf("%q is not a decimal price", s)
	}
	return f, nil
}

// AdjustPrice returns price (USD per hour) changed by change, with
// Karpenter's semantics (sigs.k8s.io/karpenter v1.14.0
// pkg/cloudprovider/types.go AdjustedPrice): an unsigned value replaces
// the price, "+x"/"-x" adds or subtracts x, "+x%"/"-x%" scales by
// (1 ± x/100); the result is floored at 0. An empty change returns price.
// It returns an error for a change that is none of these.
func AdjustPrice(price float64, change string) (float64, error) {
	if change == "" {
		return price, nil
	}
	if !strings.HasPrefix(change, "+") && !strings.HasPrefix(change, "-") {
		return parsePrice(change)
	}
	sign := 1.0
	if change[0] == '-' {
		sign = -1
	}
	body, percent := strings.CutSuffix(change[1:], "%")
	x, err := parsePrice(body)
	if err != nil {
		return 0, fmt.Errorf("price adjustment %q: %w", change, err)
	}
	if percent && sign < 0 && x > 100 {
		return 0, fmt.Errorf("price adjustment %q: a decrease is at most 100%%", change)
	}
	out := price + sign*x
	if percent {
		out = price * (1 + sign*x/100)
	}
	return max(out, 0), nil
}

// poolLabels are the labels every node of np carries before its instance
// type is known: karpenter.sh/nodepool and the template's labels, which
// Karpenter adds to the instance type's requirements when matching an
// overlay (getOverlaidOfferings).
func poolLabels(np *karpv1.NodePool) map[string]string {
	out := make(map[string]string, len(np.Spec.Template.Labels)+1)
	maps.Copy(out, np.Spec.Template.Labels)
	out[karpv1.NodePoolLabelKey] = np.Name
	return out
}

// isOfferingKey reports whether key varies per offering rather than per
// instance type.
func isOfferingKey(key string) bool {
	return key == corev1.LabelTopologyZone || key == karpv1.CapacityTypeLabelKey
}

// selects returns the indexes of it's offerings the overlay selects in a
// NodePool with labels pool: none when a requirement on a pool or
// instance-type label fails.
func (o *Overlay) selects(pool map[string]string, it *cloudprovider.InstanceType) []int {
	for _, r := range o.reqs {
		if isOfferingKey(r.Key) {
			continue
		}
		v, ok := it.Labels[r.Key]
		if !ok {
			v, ok = pool[r.Key]
		}
		if !r.Allows(v, ok) {
			return nil
		}
	}
	var out []int
	for i, of := range it.Offerings {
		if o.reqs.AllowsOffering(of.Zone, of.CapacityType) {
			out = append(out, i)
		}
	}
	return out
}

// Order sorts overlays as Karpenter evaluates them: weight descending,
// then name descending (sigs.k8s.io/karpenter v1.14.0
// pkg/apis/v1alpha1/nodeoverlay.go OrderByWeight).
func Order(overlays []Overlay) {
	sort.SliceStable(overlays, func(a, b int) bool {
		if overlays[a].Weight != overlays[b].Weight {
			return overlays[a].Weight > overlays[b].Weight
		}
		return overlays[a].Name > overlays[b].Name
	})
}

// Pool is one NodePool with the instance types its cloud provider returns
// before any overlay.
type Pool struct {
	NodePool      *karpv1.NodePool
	InstanceTypes []*cloudprovider.InstanceType
}

// Verdict is the outcome of one NodeOverlay's evaluation.
type Verdict struct {
	// Reason is "" when the overlay applies, else ReasonRuntimeValidation
	// or ReasonConflict.
	Reason string
	// Message says what failed: the validation error, or the overlay
	// conflicted with and where.
	Message string
}

// Evaluation is the result of Evaluate: the overlays that apply, in
// order, and every overlay's verdict.
type Evaluation struct {
	// Applied are the overlays that passed validation and conflict checks,
	// highest weight first.
	Applied []Overlay
	// Verdicts is keyed by NodeOverlay name.
	Verdicts map[string]Verdict
	// Pools are the names of the NodePools evaluated.
	Pools map[string]bool
}

// mark is the last overlay that set a price of an offering or resources
// of an instance type in a NodePool.
type mark struct {
	name   string
	weight int32
	res    []corev1.ResourceName // capacity marks: that overlay's resources
}

// Evaluate validates overlays (Compile) and checks them against the
// instance types of pools in Order, with Karpenter's conflict rules
// (pkg/controllers/nodeoverlay store.go@v1.14.0): an overlay conflicts
// when, on some offering it would price, the last overlay that priced
// that offering has the same weight; or when, on some instance type it
// would add capacity to, the last capacity overlay of that type has the
// same weight and shares a resource. A conflicting overlay is left out
// everywhere (all or nothing). Its cost is O(overlays × instance types ×
// offerings) over all pools.
func Evaluate(ctx context.Context, overlays []v1alpha1.NodeOverlay, pools []Pool) *Evaluation {
	ev := &Evaluation{Verdicts: map[string]Verdict{}, Pools: map[string]bool{}}
	var compiled []Overlay
	for i := range overlays {
		o, err := Compile(ctx, &overlays[i])
		if err != nil {
			ev.Verdicts[overlays[i].Name] = Verdict{Reason: ReasonRuntimeValidation, Message: err.Error()}
			continue
		}
		compiled = append(compiled, o)
	}
	Order(compiled)
	prices := map[string]mark{}     // pool/type/zone/capacity-type
	capacities := map[string]mark{} // pool/type
	for _, o := range compiled {
		sel := o.selection(pools)
		if conflict := check(&o, sel, prices, capacities); conflict != "" {
			ev.Verdicts[o.Name] = Verdict{Reason: ReasonConflict, Message: conflict}
			continue
		}
		record(&o, sel, prices, capacities)
		ev.Applied = append(ev.Applied, o)
		ev.Verdicts[o.Name] = Verdict{}
	}
	for _, p := range pools {
		ev.Pools[p.NodePool.Name] = true
	}
	return ev
}

// selected is an instance type of a NodePool that an overlay selects,
// with the indexes of the offerings it selects.
type selected struct {
	pool string
	it   *cloudprovider.InstanceType
	idx  []int
}

// selection lists what o selects in pools, in pool and instance type
// order: what check and record both walk.
func (o *Overlay) selection(pools []Pool) []selected {
	var out []selected
	for _, p := range pools {
		labels := poolLabels(p.NodePool)
		for _, it := range p.InstanceTypes {
			if idx := o.selects(labels, it); len(idx) > 0 {
				out = append(out, selected{pool: p.NodePool.Name, it: it, idx: idx})
			}
		}
	}
	return out
}

// check returns why o, selecting sel, conflicts with an overlay already
// recorded, or "".
func check(o *Overlay, sel []selected, prices, capacities map[string]mark) string {
	for _, s := range sel {
		if o.Price != "" {
			for _, i := range s.idx {
				of := s.it.Offerings[i]
				if m, ok := prices[offeringKey(s.pool, s.it.Name, of)]; ok && m.weight == o.Weight {
					return fmt.Sprintf("conflict with NodeOverlay %q (same weight %d): both set the price of %s %s in %s in NodePool %s; give one a higher spec.weight or narrow spec.requirements",
						m.name, o.Weight, s.it.Name, of.CapacityType, of.Zone, s.pool)
				}
			}
		}
		if len(o.Capacity) > 0 {
			m, ok := capacities[s.pool+"/"+s.it.Name]
			if ok && m.weight == o.Weight {
				for _, r := range m.res {
					if _, both := o.Capacity[r]; both {
						return fmt.Sprintf("conflict with NodeOverlay %q (same weight %d): both set capacity %s of %s in NodePool %s; give one a higher spec.weight or narrow spec.requirements",
							m.name, o.Weight, r, s.it.Name, s.pool)
					}
				}
			}
		}
	}
	return ""
}

// record marks the offerings and instance types o, selecting sel, sets.
func record(o *Overlay, sel []selected, prices, capacities map[string]mark) {
	res := slices.Sorted(maps.Keys(o.Capacity))
	for _, s := range sel {
		if o.Price != "" {
			for _, i := range s.idx {
				prices[offeringKey(s.pool, s.it.Name, s.it.Offerings[i])] = mark{name: o.Name, weight: o.Weight}
			}
		}
		if len(o.Capacity) > 0 {
			capacities[s.pool+"/"+s.it.Name] = mark{name: o.Name, weight: o.Weight, res: res}
		}
	}
}

func offeringKey(pool, it string, of cloudprovider.Offering) string {
	return pool + "/" + it + "/" + of.Zone + "/" + of.CapacityType
}

// Apply returns its with the applied overlays of e for NodePool np: per
// offering the price of the first overlay (in Order) that selects it and
// sets one, per extended resource the quantity of the first that adds
// it, with PriceOverlay and CapacityOverlays naming them. Instance types
// no overlay selects are returned as they are; the others are copies,
// so the cloud provider's cached types are never changed.
func (e *Evaluation) Apply(np *karpv1.NodePool, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	if len(e.Applied) == 0 {
		return its
	}
	labels := poolLabels(np)
	out := make([]*cloudprovider.InstanceType, len(its))
	for k, it := range its {
		out[k] = it
		var cp *cloudprovider.InstanceType
		for oi := range e.Applied {
			o := &e.Applied[oi]
			idx := o.selects(labels, it)
			if len(idx) == 0 {
				continue
			}
			if cp == nil {
				c := *it
				c.Offerings = slices.Clone(it.Offerings)
				cp = &c
			}
			if o.Price != "" {
				for _, i := range idx {
					of := &cp.Offerings[i]
					if of.PriceOverlay != "" {
						continue
					}
					// Compile checked the format; an error cannot happen.
					if p, err := AdjustPrice(of.PriceUSDPerHour, o.Price); err == nil {
						of.PriceUSDPerHour, of.PriceOverlay = p, o.Name
					}
				}
			}
			for _, r := range slices.Sorted(maps.Keys(o.Capacity)) {
				if _, done := cp.CapacityOverlays[r]; done {
					continue
				}
				if cp.CapacityOverlays == nil {
					cp.CapacityOverlays = map[corev1.ResourceName]string{}
					cp.Capacity = maps.Clone(it.Capacity)
					cp.Allocatable = maps.Clone(it.Allocatable)
					if cp.Capacity == nil {
						cp.Capacity = corev1.ResourceList{}
					}
					if cp.Allocatable == nil {
						cp.Allocatable = corev1.ResourceList{}
					}
				}
				q := o.Capacity[r]
				cp.Capacity[r], cp.Allocatable[r] = q.DeepCopy(), q.DeepCopy()
				cp.CapacityOverlays[r] = o.Name
			}
		}
		if cp != nil {
			out[k] = cp
		}
	}
	return out
}

// Names returns the names of the overlays in e.Applied, sorted, for logs.
func (e *Evaluation) Names() []string {
	out := make([]string, 0, len(e.Applied))
	for _, o := range e.Applied {
		out = append(out, o.Name)
	}
	slices.Sort(out)
	return out
}
