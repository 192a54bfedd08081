package requirements

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestAllow(t *testing.T) {
	for _, c := range []struct {
		r       corev1.NodeSelectorRequirement
		value   string
		present bool
		want    bool
	}{
		{req("k", corev1.NodeSelectorOpIn, "a", "b"), "a", true, true},
		{req("k", corev1.NodeSelectorOpIn, "a"), "", false, false},
		{req("k", corev1.NodeSelectorOpNotIn, "a"), "a", true, false},
		{req("k", corev1.NodeSelectorOpNotIn, "a"), "", false, true},
		{req("k", corev1.NodeSelectorOpExists), "1", true, true},
		{req("k", corev1.NodeSelectorOpExists), "", false, false},
		{req("k", corev1.NodeSelectorOpDoesNotExist), "", false, true},
		{req("k", corev1.NodeSelectorOpDoesNotExist), "1", true, false},
		{req("k", corev1.NodeSelectorOpGt, "4"), "8", true, true},
		{req("k", corev1.NodeSelectorOpGt, "4"), "4", true, false},
		{req("k", corev1.NodeSelectorOpLt, "4"), "2", true, true},
		{req("k", karpv1.NodeSelectorOpGte, "4"), "4", true, true},
		{req("k", karpv1.NodeSelectorOpLte, "4"), "5", true, false},
		{req("k", corev1.NodeSelectorOpGt, "4"), "x", true, false},
		{req("k", corev1.NodeSelectorOpGt, "4"), "", false, false},
	} {
		if got := Allow(c.r, c.value, c.present); got != c.want {
			t.Errorf("Allow(%v, %q, %v) = %v, want %v", c.r, c.value, c.present, got, c.want)
		}
	}
}

func TestMatchInstanceTypeIgnoresNodeLabels(t *testing.T) {
	labels := map[string]string{corev1.LabelArchStable: "amd64", "karpenter.k8s.aws/instance-cpu": "4"}
	reqs := []corev1.NodeSelectorRequirement{
		req(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "default"),
		req("team", corev1.NodeSelectorOpIn, "a"),
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "2"),
		req("karpenter.k8s.aws/instance-gpu-count", corev1.NodeSelectorOpDoesNotExist),
	}
	if !MatchInstanceType(reqs, labels) {
		t.Fatal("want match")
	}
	if MatchLabels(reqs, labels) {
		t.Fatal("MatchLabels must be strict about karpenter.sh/nodepool")
	}
	if MatchInstanceType(append(reqs, req("karpenter.k8s.aws/instance-gpu-count", corev1.NodeSelectorOpExists)), labels) {
		t.Fatal("gpu-count Exists must reject a type without GPUs")
	}
}

func TestAllowsAndValues(t *testing.T) {
	reqs := []corev1.NodeSelectorRequirement{
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "a", "b", "c"),
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "b", "c"),
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "c"),
	}
	if Allows(reqs, corev1.LabelTopologyZone, "a") || !Allows(reqs, corev1.LabelTopologyZone, "b") || Allows(reqs, corev1.LabelTopologyZone, "c") {
		t.Fatal("Allows")
	}
	if !Allows(reqs, karpv1.CapacityTypeLabelKey, "spot") {
		t.Fatal("unconstrained key must allow")
	}
	v, ok := Values(reqs, corev1.LabelTopologyZone)
	if !ok || len(v) != 2 || v[0] != "b" || v[1] != "c" {
		t.Fatalf("Values = %v, %v", v, ok)
	}
	if _, ok := Values(reqs, "other"); ok {
		t.Fatal("Values of unconstrained key")
	}
}
