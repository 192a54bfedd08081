package lint

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Rule IDs of the unsupported-field rules (KX2xx): a Karpenter v1 field
// that karpx's CRDs accept, because manifests written for Karpenter must
// decode unchanged, but that karpx does not implement yet. Such a field
// is denied, never accepted and ignored (karpx issues 32 and 33).
const (
	// RuleUnsupportedEC2NodeClassField (KX201, deny): an EC2NodeClass
	// sets a field karpx does not implement yet.
	RuleUnsupportedEC2NodeClassField = "KX201"
	// RuleUnsupportedNodePoolField (KX202, deny): a NodePool sets a field,
	// or a value of one, that karpx does not implement yet.
	RuleUnsupportedNodePoolField = "KX202"
	// RuleUnsupportedKind (KX203, deny): an object of a Karpenter kind
	// karpx does not serve yet. None is listed today: NodeOverlay, the
	// kind it denied, is served behind the NodeOverlay feature gate
	// (autoscaler/nodeoverlay, karpx issue 33).
	RuleUnsupportedKind = "KX203"
)

// NotSupportedYet ends the message of every unsupported-field finding, so
// that users and tests can recognise it.
const NotSupportedYet = "not supported by karpx yet"

// UnsupportedField is one entry of the deny list: a property of a CRD that
// karpx ships (manifests/crds) which no karpx controller reads.
type UnsupportedField struct {
	// Kind is the object's kind: "EC2NodeClass", "NodePool" or "NodeClaim".
	Kind string
	// Path is the CRD property path, "." between properties and "[]" for
	// each array element: "spec.capacityReservationSelectorTerms" or
	// "spec.template.spec.requirements[].minValues". The entry covers the
	// property and everything below it.
	Path string
	// Value, when not empty, limits the entry to that string value of the
	// property (the property itself is read, the value is not implemented).
	Value string
	// RuleID is the rule that denies it (KX2xx).
	RuleID string
	// Reason says what Karpenter does with the field and what karpx would
	// do instead if it accepted it.
	Reason string
}

// unsupportedFields is the deny list. TestEveryCRDPropertyReadOrDenied
// fails when a property of manifests/crds is neither read by the
// autoscaler, webhook or plugin nor covered here. Entries under status are
// listed for that test only: the API server drops status on create and
// update of the object, so admission does not check them.
var unsupportedFields = []UnsupportedField{
	{"EC2NodeClass", "spec.instanceStorePolicy", "", RuleUnsupportedEC2NodeClassField,
		"Karpenter formats the NVMe instance-store volumes as one RAID0 array for the node's ephemeral storage (RAID0); karpx would leave them unformatted while pods are scheduled against the ephemeral storage it advertises"},
	{"EC2NodeClass", "spec.networkInterfaces", "", RuleUnsupportedEC2NodeClassField,
		"Karpenter lays out the instance's ENA and EFA network interfaces as listed; karpx would launch with the single default interface and no EFA"},
	{"EC2NodeClass", "spec.ipPrefixCount", "", RuleUnsupportedEC2NodeClassField,
		"Karpenter assigns that many /28 IPv4 prefixes to the primary interface and counts them in max pods; karpx would assign none"},
	{"EC2NodeClass", "spec.placementGroupSelector", "", RuleUnsupportedEC2NodeClassField,
		"Karpenter launches into the selected placement group; karpx would launch outside it"},
	{"EC2NodeClass", "spec.cpuOptions", "", RuleUnsupportedEC2NodeClassField,
		"Karpenter sets the instance's CPU options (nested virtualization); karpx would launch with EC2's defaults"},
	{"EC2NodeClass", "spec.connectionTracking", "", RuleUnsupportedEC2NodeClassField,
		"Karpenter sets the interfaces' idle connection-tracking timeouts; karpx would leave EC2's defaults"},
	{"EC2NodeClass", "spec.blockDeviceMappings[].rootVolume", "true", RuleUnsupportedEC2NodeClassField,
		"Karpenter advertises the root volume's size as the node's ephemeral storage; karpx advertises a fixed 20Gi whatever the volume, so pods are scheduled against storage the node may not have"},
	{"NodePool", "spec.disruption.consolidationPolicy", "Balanced", RuleUnsupportedNodePoolField,
		"Karpenter v1.14 consolidates a Balanced NodePool's underutilized nodes where the savings outweigh the disruption; karpx would consolidate only its empty nodes, as for WhenEmpty (autoscaler/controllers/disruption/methods.go)"},
}

// unsupportedKinds are the Karpenter kinds karpx does not serve, by
// apiVersion and kind, with the reason.
var unsupportedKinds = map[[2]string]string{}

// UnsupportedFields returns the deny list, sorted by kind and path. The
// slice is a fresh copy.
func UnsupportedFields() []UnsupportedField {
	out := append([]UnsupportedField(nil), unsupportedFields...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Path < out[j].Path
	})
	return out
}

// CheckUnsupported denies what obj (a decoded JSON object with apiVersion
// and kind) sets of the deny list: one finding per set field, with the
// field's path as written ("spec.networkInterfaces",
// "spec.blockDeviceMappings[1].rootVolume"), the rule ID and a message
// that starts with NotSupportedYet (after the value, for an entry limited
// to one) and says what Karpenter does with the field; one finding for an object of a kind karpx does
// not serve. A field is set when it is present and not null, nor an empty
// list or map (which ask for nothing). Fields under status are not
// checked. The walk visits at most the entries' paths, so its cost is
// bounded by the object's size.
func CheckUnsupported(obj map[string]any) Findings {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if reason, ok := unsupportedKinds[[2]string{apiVersion, kind}]; ok {
		return Findings{{RuleID: RuleUnsupportedKind, Severity: severityOf(RuleUnsupportedKind),
			Message: fmt.Sprintf("%s (%s) is %s: %s", kind, apiVersion, NotSupportedYet, reason),
			Fix:     "remove the object; karpx launches nodes from NodePools and EC2NodeClasses alone"}}
	}
	var out Findings
	for _, u := range unsupportedFields {
		if u.Kind != kind || strings.HasPrefix(u.Path, "status.") {
			continue
		}
		for _, at := range setAt(obj, strings.Split(u.Path, "."), "") {
			if u.Value != "" && at.value != u.Value {
				continue
			}
			msg := NotSupportedYet + ": " + u.Reason
			if u.Value != "" {
				msg = fmt.Sprintf("%s %s", u.Value, msg)
			}
			fix := "remove " + at.path
			if u.Value != "" {
				fix = "use another value of " + at.path
			}
			out = append(out, Finding{RuleID: u.RuleID, Severity: severityOf(u.RuleID), Field: at.path,
				Message: msg,
				Fix:     fix + ", or run the workload under Karpenter until karpx implements it"})
		}
	}
	return out
}

// CheckUnsupportedSpec is CheckUnsupported for an object of kind whose
// spec is the JSON spec, for callers that do not decode the whole object
// (the webhook's EC2NodeClass handler). Only the spec's members that a
// deny-list entry starts with are decoded; the rest are skipped unparsed.
// A spec that is not a JSON object has no findings (the API server's
// schema rejects it).
func CheckUnsupportedSpec(kind string, spec json.RawMessage) Findings {
	if len(spec) == 0 {
		return nil
	}
	var members map[string]member
	if err := json.Unmarshal(spec, &members); err != nil {
		return nil
	}
	decoded := map[string]any{}
	for _, u := range unsupportedFields {
		rest, ok := strings.CutPrefix(u.Path, "spec.")
		if u.Kind != kind || !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		name = strings.TrimSuffix(name, "[]")
		raw, ok := members[name]
		if _, done := decoded[name]; !ok || done {
			continue
		}
		var v any
		if err := json.Unmarshal(raw.raw, &v); err == nil {
			decoded[name] = v
		}
	}
	if len(decoded) == 0 {
		return nil
	}
	return CheckUnsupported(map[string]any{"kind": kind, "spec": decoded})
}

// member is one member of a JSON object, as a slice of the input that
// encoding/json hands to UnmarshalJSON: not copied (a spec's userData
// alone is up to 16 KiB), so valid only while that input is.
type member struct{ raw []byte }

// UnmarshalJSON implements json.Unmarshaler, keeping data uncopied.
func (m *member) UnmarshalJSON(data []byte) error {
	m.raw = data
	return nil
}

// fieldAt is a set field found by setAt: its path with array indices
// ("spec.a[2].b") and its value when that is a string, boolean or number
// (as fmt.Sprint prints it), else "".
type fieldAt struct {
	path  string
	value string
}

// setAt returns the fields at steps below v (steps ending in "[]" cross
// every element of an array), as set is defined in CheckUnsupported.
func setAt(v any, steps []string, prefix string) []fieldAt {
	if len(steps) == 0 {
		if !isSet(v) {
			return nil
		}
		var s string
		switch v.(type) {
		case string, bool, float64, int64:
			s = fmt.Sprint(v)
		}
		return []fieldAt{{path: prefix, value: s}}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	name, array := strings.CutSuffix(steps[0], "[]")
	child, ok := m[name]
	if !ok {
		return nil
	}
	path := name
	if prefix != "" {
		path = prefix + "." + name
	}
	if !array {
		return setAt(child, steps[1:], path)
	}
	items, _ := child.([]any)
	var out []fieldAt
	for i, item := range items {
		out = append(out, setAt(item, steps[1:], fmt.Sprintf("%s[%d]", path, i))...)
	}
	return out
}

func isSet(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// unsupportedRules are the KX2xx rules' table entries, added to the rule
// table (Rules) by init.
var unsupportedRules = []Rule{
	{RuleUnsupportedEC2NodeClassField, "ec2nodeclass-field-not-supported", "EC2NodeClass", SeverityDeny,
		"An EC2NodeClass sets a Karpenter v1 field karpx does not implement yet: " + listPaths("EC2NodeClass") + ". The finding names the field and what Karpenter does with it.",
		"Karpenter AWS provider v1.14.0, pkg/apis/v1/ec2nodeclass.go and its CRD; karpx issues 32 (no field accepted and ignored) and 33 (the v1.14 EC2NodeClass schema); the deny list in lint/unsupported.go.",
		"karpx's CRD accepts every Karpenter v1.14 field so that manifests decode unchanged; without this rule karpx would launch nodes that silently lack what the field asks for (unformatted instance store, capacity outside the reservation, no EFA).",
		"Remove the field, or keep the workload on Karpenter until karpx implements it."},
	{RuleUnsupportedNodePoolField, "nodepool-field-not-supported", "NodePool", SeverityDeny,
		"A NodePool sets a Karpenter v1 field, or a value of one, karpx does not implement yet: " + listPaths("NodePool") + ".",
		"sigs.k8s.io/karpenter v1.14.0, pkg/apis/v1/nodepool.go (consolidationPolicy Balanced); karpx issues 32 and 33; the deny list in lint/unsupported.go.",
		"A Balanced NodePool would keep underutilized nodes that Karpenter consolidates.",
		"Use consolidationPolicy WhenEmpty or WhenEmptyOrUnderutilized."},
}

// listPaths lists the deny list's paths of kind, for the rule summary.
func listPaths(kind string) string {
	var ps []string
	for _, u := range UnsupportedFields() {
		if u.Kind != kind || strings.HasPrefix(u.Path, "status.") {
			continue
		}
		if u.Value != "" {
			ps = append(ps, u.Path+" "+u.Value)
			continue
		}
		ps = append(ps, u.Path)
	}
	return strings.Join(ps, ", ")
}

func init() {
	rules = append(rules, unsupportedRules...)
}
