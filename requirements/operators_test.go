package requirements_test

import (
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpscheduling "sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpx/karpx/requirements"
)

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

const cpu = "karpenter.k8s.aws/instance-cpu"

// TestMatchLabelsOperators is the table every former copy of requirement
// matching (scheduling, the AWS launch path, explain, lint) now shares:
// each operator against a present, absent and non-integer label, empty
// requirements, and conjunctions.
func TestMatchLabelsOperators(t *testing.T) {
	four := map[string]string{cpu: "4", corev1.LabelArchStable: "amd64"}
	none := map[string]string{corev1.LabelArchStable: "amd64"}
	odd := map[string]string{cpu: "four"}
	for _, tt := range []struct {
		name   string
		reqs   []corev1.NodeSelectorRequirement
		labels map[string]string
		want   bool
	}{
		{"no requirements match anything", nil, four, true},
		{"no requirements match no labels", nil, nil, true},
		{"In listed", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpIn, "2", "4")}, four, true},
		{"In not listed", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpIn, "2")}, four, false},
		{"In absent", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpIn, "4")}, none, false},
		{"In no values", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpIn)}, four, false},
		{"NotIn listed", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpNotIn, "4")}, four, false},
		{"NotIn absent", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpNotIn, "4")}, none, true},
		{"Exists present", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpExists)}, four, true},
		{"Exists absent", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpExists)}, none, false},
		{"DoesNotExist present", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpDoesNotExist)}, four, false},
		{"DoesNotExist absent", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpDoesNotExist)}, none, true},
		{"Exists and DoesNotExist", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpExists), expr(cpu, corev1.NodeSelectorOpDoesNotExist)}, four, false},
		{"Gt below", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "3")}, four, true},
		{"Gt equal", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "4")}, four, false},
		{"Gt absent", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "0")}, none, false},
		{"Gt non-integer label", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "0")}, odd, false},
		{"Gt non-integer value admits nothing", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "x")}, four, false},
		{"Gt two values admits nothing", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "1", "2")}, four, false},
		{"Lt above", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpLt, "5")}, four, true},
		{"Lt equal", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpLt, "4")}, four, false},
		{"Lt non-integer label", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpLt, "9")}, odd, false},
		{"Gte equal", []corev1.NodeSelectorRequirement{expr(cpu, karpv1.NodeSelectorOpGte, "4")}, four, true},
		{"Lte equal", []corev1.NodeSelectorRequirement{expr(cpu, karpv1.NodeSelectorOpLte, "4")}, four, true},
		{"Lte below", []corev1.NodeSelectorRequirement{expr(cpu, karpv1.NodeSelectorOpLte, "3")}, four, false},
		{"Gt and Lt window", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "3"), expr(cpu, corev1.NodeSelectorOpLt, "5")}, four, true},
		{"Gt and Lt empty window", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpGt, "4"), expr(cpu, corev1.NodeSelectorOpLt, "5")}, four, false},
		{"unknown operator admits nothing", []corev1.NodeSelectorRequirement{expr(cpu, "Near", "4")}, four, false},
		{"every key must match", []corev1.NodeSelectorRequirement{expr(cpu, corev1.NodeSelectorOpIn, "4"), expr(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")}, four, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := requirements.MatchLabels(tt.reqs, tt.labels); got != tt.want {
				t.Errorf("MatchLabels(%v, %v) = %t, want %t", tt.reqs, tt.labels, got, tt.want)
			}
		})
	}
}

// TestOperatorsAgreeWithKarpenter compares each operator with Karpenter
// v1.13.0's pkg/scheduling on labels that carry the key (where Karpenter's
// Intersects judges it): integer, non-integer and boundary values.
func TestOperatorsAgreeWithKarpenter(t *testing.T) {
	ops := []struct {
		op     corev1.NodeSelectorOperator
		values []string
	}{
		{corev1.NodeSelectorOpIn, []string{"2", "4"}},
		{corev1.NodeSelectorOpNotIn, []string{"4"}},
		{corev1.NodeSelectorOpExists, nil},
		{corev1.NodeSelectorOpDoesNotExist, nil},
		{corev1.NodeSelectorOpGt, []string{"4"}},
		{corev1.NodeSelectorOpLt, []string{"4"}},
		{karpv1.NodeSelectorOpGte, []string{"4"}},
		{karpv1.NodeSelectorOpLte, []string{"4"}},
	}
	compared := 0
	for _, o := range ops {
		theirs := karpscheduling.NewNodeSelectorRequirementsWithMinValues(karpv1.NodeSelectorRequirementWithMinValues{Key: cpu, Operator: o.op, Values: o.values})
		ours := requirements.Parse([]corev1.NodeSelectorRequirement{expr(cpu, o.op, o.values...)})
		for _, v := range []string{"2", "3", "4", "5", "four", ""} {
			labels := map[string]string{cpu: v}
			a, b := ours.MatchLabels(labels), karpscheduling.NewLabelRequirements(labels).Intersects(theirs) == nil
			if a != b {
				t.Errorf("%s %v on %q: karpx %t, Karpenter %t", o.op, o.values, v, a, b)
			}
			compared++
		}
	}
	if compared != len(ops)*6 {
		t.Fatalf("compared %d cases", compared)
	}
}

// TestNewErrorsNameTheFix: a malformed expression is an error naming its
// origin, the operator and what it needs.
func TestNewErrorsNameTheFix(t *testing.T) {
	for _, tt := range []struct {
		op     corev1.NodeSelectorOperator
		values []string
		want   string
	}{
		{corev1.NodeSelectorOpGt, []string{"four"}, `NodePool requirement: operator Gt needs an integer value, got "four"`},
		{corev1.NodeSelectorOpLt, []string{"1", "2"}, "NodePool requirement: operator Lt needs exactly one integer value, got 2 values"},
		{"Near", nil, `NodePool requirement: unknown operator "Near"`},
	} {
		_, err := requirements.New(cpu, tt.op, tt.values, nil, "NodePool requirement")
		if err == nil || err.Error() != tt.want {
			t.Errorf("New(%s %v) error %v, want %q", tt.op, tt.values, err, tt.want)
		}
	}
}

func TestKnownOperator(t *testing.T) {
	for _, op := range []corev1.NodeSelectorOperator{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"} {
		if !requirements.KnownOperator(op) {
			t.Errorf("KnownOperator(%s) = false", op)
		}
		if _, err := requirements.New(cpu, op, []string{"1"}, nil, ""); err != nil {
			t.Errorf("New(%s) = %v: a known operator must parse", op, err)
		}
	}
	for _, op := range []corev1.NodeSelectorOperator{"", "in", "Near"} {
		if requirements.KnownOperator(op) {
			t.Errorf("KnownOperator(%q) = true", op)
		}
	}
}

// TestSingleValueLabels: only In with one value becomes a label (the
// launch path's node labels and cluster state's in-flight nodes).
func TestSingleValueLabels(t *testing.T) {
	mv := 2
	got := requirements.SingleValueLabels([]karpv1.NodeSelectorRequirementWithMinValues{
		{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}},
		{Key: "tier", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}},
		{Key: "gpu", Operator: corev1.NodeSelectorOpExists},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}, MinValues: &mv},
	})
	want := map[string]string{"team": "a", corev1.LabelInstanceTypeStable: "m5.large"}
	if !maps.Equal(got, want) {
		t.Errorf("SingleValueLabels = %v, want %v", got, want)
	}
	if got := requirements.SingleValueLabels(nil); len(got) != 0 {
		t.Errorf("SingleValueLabels(nil) = %v, want empty", got)
	}
}

// TestAllowsOffering: zone and capacity type are judged per offering;
// every other key, and an unconstrained one, is ignored.
func TestAllowsOffering(t *testing.T) {
	reqs := requirements.ParseNodeClaim([]karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"spot"}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}},
	})
	for _, tt := range []struct {
		zone, ct string
		want     bool
	}{
		{"us-east-1a", "on-demand", true},
		{"us-east-1b", "reserved", true},
		{"us-east-1a", "spot", false},
		{"us-east-1c", "on-demand", false},
	} {
		if got := reqs.AllowsOffering(tt.zone, tt.ct); got != tt.want {
			t.Errorf("AllowsOffering(%s, %s) = %t, want %t", tt.zone, tt.ct, got, tt.want)
		}
	}
	if !requirements.Parse(nil).AllowsOffering("anywhere", "spot") {
		t.Error("no requirements must allow every offering")
	}
}

func ExampleRequirements_MatchInstanceType() {
	reqs := requirements.Parse([]corev1.NodeSelectorRequirement{
		expr(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "default"),
		expr(cpu, corev1.NodeSelectorOpGt, "2"),
	})
	fmt.Println(reqs.MatchInstanceType(map[string]string{cpu: "4"}), reqs.MatchLabels(map[string]string{cpu: "4"}))
	// Output: true false
}
