package requirements

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func mustRequirement(t *testing.T, op corev1.NodeSelectorOperator, values ...string) Requirement {
	t.Helper()
	r, err := New("k", op, values, nil, string(op))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRequirementAllows(t *testing.T) {
	type probe struct {
		value   string
		present bool
		want    bool
	}
	tests := []struct {
		op     corev1.NodeSelectorOperator
		values []string
		probes []probe
	}{
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, []probe{{"a", true, true}, {"c", true, false}, {"", false, false}}},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, []probe{{"a", true, false}, {"c", true, true}, {"", false, true}}},
		{corev1.NodeSelectorOpExists, nil, []probe{{"x", true, true}, {"", false, false}}},
		{corev1.NodeSelectorOpDoesNotExist, nil, []probe{{"x", true, false}, {"", false, true}}},
		{corev1.NodeSelectorOpGt, []string{"2"}, []probe{{"3", true, true}, {"2", true, false}, {"x", true, false}, {"", false, false}}},
		{karpv1.NodeSelectorOpGte, []string{"2"}, []probe{{"2", true, true}, {"1", true, false}}},
		{corev1.NodeSelectorOpLt, []string{"2"}, []probe{{"1", true, true}, {"2", true, false}}},
		{karpv1.NodeSelectorOpLte, []string{"2"}, []probe{{"2", true, true}, {"3", true, false}}},
	}
	for _, tt := range tests {
		r := mustRequirement(t, tt.op, tt.values...)
		for _, p := range tt.probes {
			if got := r.Allows(p.value, p.present); got != p.want {
				t.Errorf("%s %v allows(%q, present=%v) = %v, want %v", tt.op, tt.values, p.value, p.present, got, p.want)
			}
		}
	}
}

func TestRequirementIntersect(t *testing.T) {
	in := func(v ...string) Requirement { return mustRequirement(t, corev1.NodeSelectorOpIn, v...) }
	notIn := func(v ...string) Requirement { return mustRequirement(t, corev1.NodeSelectorOpNotIn, v...) }
	tests := []struct {
		name      string
		a, b      Requirement
		wantEmpty bool
		want      []karpv1.NodeSelectorRequirementWithMinValues
	}{
		{"In ∩ In", in("a", "b"), in("b", "c"), false,
			[]karpv1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
		{"disjoint In", in("a"), in("b"), true, nil},
		{"In ∩ NotIn", in("a", "b"), notIn("a"), false,
			[]karpv1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
		{"NotIn ∩ NotIn", notIn("a"), notIn("b"), false,
			[]karpv1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a", "b"}}}},
		{"In ∩ Gt", in("1", "5"), mustRequirement(t, corev1.NodeSelectorOpGt, "2"), false,
			[]karpv1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"5"}}}},
		{"Gt ∩ Lt empty", mustRequirement(t, corev1.NodeSelectorOpGt, "2"), mustRequirement(t, corev1.NodeSelectorOpLt, "3"), true, nil},
		{"Gt ∩ Lt", mustRequirement(t, corev1.NodeSelectorOpGt, "2"), mustRequirement(t, corev1.NodeSelectorOpLt, "8"), false,
			[]karpv1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}}, {Key: "k", Operator: corev1.NodeSelectorOpLt, Values: []string{"8"}}}},
		{"Exists ∩ DoesNotExist", mustRequirement(t, corev1.NodeSelectorOpExists), mustRequirement(t, corev1.NodeSelectorOpDoesNotExist), true, nil},
		{"NotIn ∩ DoesNotExist", notIn("a"), mustRequirement(t, corev1.NodeSelectorOpDoesNotExist), false,
			[]karpv1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpDoesNotExist}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, got := range []Requirement{tt.a.Intersect(tt.b), tt.b.Intersect(tt.a)} {
				if got.Empty() != tt.wantEmpty {
					t.Fatalf("empty() = %v, want %v", got.Empty(), tt.wantEmpty)
				}
				if !tt.wantEmpty && !reflect.DeepEqual(got.Expressions(), tt.want) {
					t.Errorf("expressions %v, want %v", got.Expressions(), tt.want)
				}
			}
		})
	}
}

func TestRequirementErrors(t *testing.T) {
	for _, tt := range []struct {
		op     corev1.NodeSelectorOperator
		values []string
	}{
		{corev1.NodeSelectorOpGt, []string{"x"}},
		{corev1.NodeSelectorOpLt, nil},
		{"Near", []string{"a"}},
	} {
		if _, err := New("k", tt.op, tt.values, nil, "test"); err == nil {
			t.Errorf("%s %v: no error", tt.op, tt.values)
		}
	}
}

func TestRequirementNormalizesKeys(t *testing.T) {
	r, err := New("failure-domain.beta.kubernetes.io/zone", corev1.NodeSelectorOpIn, []string{"us-east-1a"}, nil, "test")
	if err != nil || r.Key != corev1.LabelTopologyZone {
		t.Errorf("key %q (err %v), want %s", r.Key, err, corev1.LabelTopologyZone)
	}
}
