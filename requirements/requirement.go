package requirements

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Requirement is the set of values one label key may take on a node. It is
// built from one node selector expression (In, NotIn, Exists, DoesNotExist,
// Gt, Gte, Lt, Lte) and narrowed by intersecting it with others on the same
// key. It is a value: Intersect returns a new one. It is karpx's one
// implementation of requirement matching: the scheduler, the AWS cloud
// provider's launch and AMI selection all use it.
type Requirement struct {
	// Key is the label key, normalised (see New).
	Key string
	// complement false: the label value must be one of values.
	// complement true: the label value may be anything but values.
	complement bool
	values     map[string]struct{}
	// greaterThan and lessThan are exclusive integer bounds on the value
	// (Gt, Lt; Gte n is Gt n-1 and Lte n is Lt n+1). math.MinInt64 and
	// math.MaxInt64 mean unbounded.
	greaterThan, lessThan int64
	// AllowAbsent: a node without the label satisfies the requirement
	// (NotIn, DoesNotExist), as in Kubernetes label selectors.
	AllowAbsent bool
	// MinValues is the NodePool's spec.template.spec.requirements[].minValues:
	// the NodeClaim must keep at least this many distinct values of the key
	// among its instance types (0: no minimum).
	MinValues int
	// Origin says where the requirement comes from, for error messages, e.g.
	// `nodeSelector kubernetes.io/arch=s390x`.
	Origin string
}

// New parses one node selector expression. key is normalised
// first (beta.kubernetes.io/arch → kubernetes.io/arch, …) with Karpenter's
// karpv1.NormalizedLabels, as Karpenter does for pod and NodePool
// requirements.
func New(key string, op corev1.NodeSelectorOperator, values []string, minValues *int, origin string) (Requirement, error) {
	if normalized, ok := karpv1.NormalizedLabels[key]; ok {
		key = normalized
	}
	r := Requirement{Key: key, greaterThan: math.MinInt64, lessThan: math.MaxInt64, Origin: origin}
	if minValues != nil {
		r.MinValues = *minValues
	}
	bound := func() (int64, error) {
		if len(values) != 1 {
			return 0, fmt.Errorf("%s: operator %s needs exactly one integer value, got %d values", origin, op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: operator %s needs an integer value, got %q", origin, op, values[0])
		}
		return n, nil
	}
	var err error
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = setOf(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement, r.values, r.AllowAbsent = true, setOf(values), true
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
		r.AllowAbsent = true
	case corev1.NodeSelectorOpGt, karpv1.NodeSelectorOpGte, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpLte:
		r.complement = true
		var n int64
		n, err = bound()
		// On integers Gte n is Gt n-1 and Lte n is Lt n+1.
		switch op {
		case corev1.NodeSelectorOpGt:
			r.greaterThan = n
		case karpv1.NodeSelectorOpGte:
			r.greaterThan = n - 1
		case corev1.NodeSelectorOpLt:
			r.lessThan = n
		default:
			r.lessThan = n + 1
		}
	default:
		err = fmt.Errorf("%s: unknown operator %q", origin, op)
	}
	return r, err
}

// operators are the operators New parses: Kubernetes' six and Karpenter's
// Gte and Lte (sigs.k8s.io/karpenter pkg/apis/v1).
var operators = []corev1.NodeSelectorOperator{
	corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist,
	corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte,
}

// KnownOperator reports whether New parses op. Callers that leave unknown
// operators to the CRD's validation (package lint) skip the others.
func KnownOperator(op corev1.NodeSelectorOperator) bool {
	return slices.Contains(operators, op)
}

func setOf(values []string) map[string]struct{} {
	s := make(map[string]struct{}, len(values))
	for _, v := range values {
		s[v] = struct{}{}
	}
	return s
}

func (r Requirement) bounded() bool {
	return r.greaterThan != math.MinInt64 || r.lessThan != math.MaxInt64
}

// Allows reports whether a node whose label r.Key is value (present) or
// missing (!present) satisfies r.
func (r Requirement) Allows(value string, present bool) bool {
	if !present {
		return r.AllowAbsent
	}
	if _, listed := r.values[value]; listed == r.complement {
		return false
	}
	if r.bounded() {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n <= r.greaterThan || n >= r.lessThan {
			return false
		}
	}
	return true
}

// Intersect returns the values both r and o allow.
func (r Requirement) Intersect(o Requirement) Requirement {
	out := Requirement{
		Key:         r.Key,
		greaterThan: max(r.greaterThan, o.greaterThan),
		lessThan:    min(r.lessThan, o.lessThan),
		AllowAbsent: r.AllowAbsent && o.AllowAbsent,
		MinValues:   max(r.MinValues, o.MinValues),
		Origin:      r.Origin + " and " + o.Origin,
	}
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = union(r.values, o.values)
	case r.complement:
		out.values = subtract(o.values, r.values)
	case o.complement:
		out.values = subtract(r.values, o.values)
	default:
		out.values = map[string]struct{}{}
		for v := range r.values {
			if _, ok := o.values[v]; ok {
				out.values[v] = struct{}{}
			}
		}
	}
	if !out.complement {
		// Apply the bounds now so that values only ever lists allowed values.
		for v := range out.values {
			if !out.Allows(v, true) {
				delete(out.values, v)
			}
		}
	}
	return out
}

func union(a, b map[string]struct{}) map[string]struct{} {
	out := make(map[string]struct{}, len(a)+len(b))
	for v := range a {
		out[v] = struct{}{}
	}
	for v := range b {
		out[v] = struct{}{}
	}
	return out
}

func subtract(a, b map[string]struct{}) map[string]struct{} {
	out := make(map[string]struct{}, len(a))
	for v := range a {
		if _, ok := b[v]; !ok {
			out[v] = struct{}{}
		}
	}
	return out
}

// Empty reports whether no node can satisfy r: no value is allowed and the
// label may not be absent either.
func (r Requirement) Empty() bool {
	if r.AllowAbsent {
		return false
	}
	if r.complement {
		return r.greaterThan != math.MinInt64 && r.lessThan != math.MaxInt64 && r.greaterThan+1 >= r.lessThan
	}
	return len(r.values) == 0
}

// SortedValues returns r.values in ascending order.
func (r Requirement) SortedValues() []string {
	out := make([]string, 0, len(r.values))
	for v := range r.values {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Expressions renders r as NodeClaim requirements (ANDed): In, or NotIn /
// Exists / DoesNotExist, and Gt / Lt for bounds. minValues goes on the
// first expression.
func (r Requirement) Expressions() []karpv1.NodeSelectorRequirementWithMinValues {
	var out []karpv1.NodeSelectorRequirementWithMinValues
	add := func(op corev1.NodeSelectorOperator, values ...string) {
		out = append(out, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: op, Values: values})
	}
	switch {
	case !r.complement && len(r.values) > 0:
		add(corev1.NodeSelectorOpIn, r.SortedValues()...)
	case !r.complement:
		add(corev1.NodeSelectorOpDoesNotExist)
	default:
		if len(r.values) > 0 {
			add(corev1.NodeSelectorOpNotIn, r.SortedValues()...)
		}
		if r.greaterThan != math.MinInt64 {
			add(corev1.NodeSelectorOpGt, strconv.FormatInt(r.greaterThan, 10))
		}
		if r.lessThan != math.MaxInt64 {
			add(corev1.NodeSelectorOpLt, strconv.FormatInt(r.lessThan, 10))
		}
		if !r.AllowAbsent && !r.bounded() {
			add(corev1.NodeSelectorOpExists)
		}
	}
	if r.MinValues > 0 && len(out) > 0 {
		mv := r.MinValues
		out[0].MinValues = &mv
	}
	return out
}

// Set is a conjunction of requirements, at most one per key.
type Set map[string]Requirement

// Add intersects r into the set.
func (s Set) Add(r Requirement) {
	if old, ok := s[r.Key]; ok {
		r = old.Intersect(r)
	}
	s[r.Key] = r
}

// Copy returns a shallow copy (requirements are values).
func (s Set) Copy() Set {
	out := make(Set, len(s))
	for k, r := range s {
		out[k] = r
	}
	return out
}

// SortedKeys returns the keys in ascending order.
func (s Set) SortedKeys() []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DescribeExpression renders a node selector expression the way a user
// wrote it, e.g. "kubernetes.io/arch In [amd64]".
func DescribeExpression(key string, op corev1.NodeSelectorOperator, values []string) string {
	switch op {
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		return key + " " + string(op)
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		return key + " " + string(op) + " " + strings.Join(values, ",")
	}
	return fmt.Sprintf("%s %s [%s]", key, op, strings.Join(values, ","))
}
