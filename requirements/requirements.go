package requirements

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// instanceTypeKeyPrefix prefixes the AWS-specific labels that describe an
// instance type (cpu, memory, family, gpu-count, …). Source: Karpenter AWS
// well-known labels (karpenter.k8s.aws/instance-*).
const instanceTypeKeyPrefix = "karpenter.k8s.aws/instance-"

// FromNodeClaim converts Karpenter's requirements (which add minValues) to
// plain node selector requirements; minValues does not change which values
// an instance must have and is dropped.
func FromNodeClaim(in []karpv1.NodeSelectorRequirementWithMinValues) []corev1.NodeSelectorRequirement {
	out := make([]corev1.NodeSelectorRequirement, 0, len(in))
	for _, r := range in {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return out
}

// ParseNodeClaim parses a NodeClaim's or NodePool's requirements (Parse
// after FromNodeClaim): minValues is dropped.
func ParseNodeClaim(reqs []karpv1.NodeSelectorRequirementWithMinValues) Requirements {
	return Parse(FromNodeClaim(reqs))
}

// SingleValueLabels returns the labels a NodeClaim's requirements fix: the
// key and value of every In requirement with exactly one value (a later
// one on the same key wins). A node launched for the NodeClaim carries
// them; keys with several allowed values depend on what EC2 launches and
// are left out.
func SingleValueLabels(reqs []karpv1.NodeSelectorRequirementWithMinValues) map[string]string {
	labels := map[string]string{}
	for _, r := range reqs {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	return labels
}

// IsInstanceTypeKey reports whether key is a label determined by the
// instance type alone, so that a requirement on it can rule a type out.
func IsInstanceTypeKey(key string) bool {
	switch key {
	case corev1.LabelInstanceTypeStable, corev1.LabelArchStable, corev1.LabelOSStable:
		return true
	}
	return strings.HasPrefix(key, instanceTypeKeyPrefix)
}

// Requirements is a parsed conjunction of node selector requirements,
// one Requirement per expression, in input order. Parse once, then match
// many instance types.
type Requirements []Requirement

// Parse parses reqs. An expression that does not parse (unknown operator,
// Gt without one integer) admits nothing, so a malformed requirement never
// widens a match.
func Parse(reqs []corev1.NodeSelectorRequirement) Requirements {
	out := make(Requirements, 0, len(reqs))
	for _, r := range reqs {
		parsed, err := New(r.Key, r.Operator, r.Values, nil, "")
		if err != nil {
			parsed = Requirement{Key: parsed.Key}
		}
		// Match the label as the caller named it (New normalises keys).
		parsed.Key = r.Key
		out = append(out, parsed)
	}
	return out
}

// MatchLabels reports whether labels satisfy every requirement, a missing
// label counting as absent.
func (rs Requirements) MatchLabels(labels map[string]string) bool {
	for _, r := range rs {
		v, ok := labels[r.Key]
		if !r.Allows(v, ok) {
			return false
		}
	}
	return true
}

// MatchInstanceType reports whether an instance type with these labels
// satisfies every requirement on an instance-type key (IsInstanceTypeKey);
// requirements on other keys are ignored.
func (rs Requirements) MatchInstanceType(labels map[string]string) bool {
	for _, r := range rs {
		if !IsInstanceTypeKey(r.Key) {
			continue
		}
		v, ok := labels[r.Key]
		if !r.Allows(v, ok) {
			return false
		}
	}
	return true
}

// Allows reports whether every requirement on key admits value; a key no
// requirement mentions admits every value. Use it for per-offering keys
// such as topology.kubernetes.io/zone and karpenter.sh/capacity-type.
func (rs Requirements) Allows(key, value string) bool {
	for _, r := range rs {
		if r.Key == key && !r.Allows(value, true) {
			return false
		}
	}
	return true
}

// AllowsOffering reports whether the requirements admit an offering in
// zone (topology.kubernetes.io/zone) with capacityType
// (karpenter.sh/capacity-type: "spot", "on-demand" or "reserved"). The
// per-offering keys are the only ones judged; see Allows.
func (rs Requirements) AllowsOffering(zone, capacityType string) bool {
	return rs.Allows(corev1.LabelTopologyZone, zone) && rs.Allows(karpv1.CapacityTypeLabelKey, capacityType)
}

// Allow reports whether requirement r admits a node whose label r.Key has
// value (present) or is absent (!present). Gt, Lt, Gte and Lte compare
// integers and fail for absent or non-integer values; an unknown operator
// admits nothing.
func Allow(r corev1.NodeSelectorRequirement, value string, present bool) bool {
	return Parse([]corev1.NodeSelectorRequirement{r})[0].Allows(value, present)
}

// MatchLabels reports whether labels satisfy every requirement, a missing
// label counting as absent.
func MatchLabels(reqs []corev1.NodeSelectorRequirement, labels map[string]string) bool {
	return Parse(reqs).MatchLabels(labels)
}

// MatchInstanceType reports whether an instance type with these labels
// satisfies every requirement on an instance-type key (IsInstanceTypeKey);
// requirements on other keys are ignored.
func MatchInstanceType(reqs []corev1.NodeSelectorRequirement, labels map[string]string) bool {
	return Parse(reqs).MatchInstanceType(labels)
}

// Allows reports whether every requirement on key admits value; a key no
// requirement mentions admits every value.
func Allows(reqs []corev1.NodeSelectorRequirement, key, value string) bool {
	return Parse(reqs).Allows(key, value)
}

// Values returns the values an In requirement on key allows, intersected
// over all In requirements on key, and false when no In requirement
// constrains key.
func Values(reqs []corev1.NodeSelectorRequirement, key string) ([]string, bool) {
	var out []string
	found := false
	for _, r := range reqs {
		if r.Key != key || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		if !found {
			out, found = slices.Clone(r.Values), true
			continue
		}
		out = slices.DeleteFunc(out, func(v string) bool { return !slices.Contains(r.Values, v) })
	}
	return out, found
}
