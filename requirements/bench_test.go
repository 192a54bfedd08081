package requirements_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpscheduling "sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/requirements"
)

// generalPurpose are Karpenter's "general-purpose" example NodePool
// requirements: amd64, linux, categories c/m/r, generation > 2.
var generalPurpose = []corev1.NodeSelectorRequirement{
	{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
	{Key: catalog.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
	{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
}

// BenchmarkMatchCatalogue measures what decided which implementation of
// requirement matching karpx keeps: matching the general-purpose
// requirements against all 1,363 catalogue types, (a) with this package
// (parse once, then map lookups per type) and (b) with Karpenter v1.13.0's
// pkg/scheduling (each instance type's labels as Requirements, built once
// as Karpenter's instance types carry them, then Requirements.Intersects, as Karpenter filters instance types).
// Both must agree on every type.
func BenchmarkMatchCatalogue(b *testing.B) {
	types := catalog.All()
	b.Run("karpx", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for range b.N {
			reqs := requirements.Parse(generalPurpose)
			n = 0
			for _, it := range types {
				if reqs.MatchLabels(it.Labels) {
					n++
				}
			}
		}
		b.ReportMetric(float64(n), "matches")
	})
	b.Run("karpenter", func(b *testing.B) {
		typeReqs := make([]karpscheduling.Requirements, len(types))
		for i, it := range types {
			typeReqs[i] = karpscheduling.NewLabelRequirements(it.Labels)
		}
		b.ReportAllocs()
		b.ResetTimer()
		n := 0
		for range b.N {
			var withMin []karpv1.NodeSelectorRequirementWithMinValues
			for _, r := range generalPurpose {
				withMin = append(withMin, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
			}
			reqs := karpscheduling.NewNodeSelectorRequirementsWithMinValues(withMin...)
			n = 0
			for _, tr := range typeReqs {
				if tr.Intersects(reqs) == nil {
					n++
				}
			}
		}
		b.ReportMetric(float64(n), "matches")
	})
}

// TestAgreesWithKarpenter: both implementations pick the same catalogue
// types for the general-purpose requirements.
func TestAgreesWithKarpenter(t *testing.T) {
	var withMin []karpv1.NodeSelectorRequirementWithMinValues
	for _, r := range generalPurpose {
		withMin = append(withMin, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	theirs := karpscheduling.NewNodeSelectorRequirementsWithMinValues(withMin...)
	ours := requirements.Parse(generalPurpose)
	n := 0
	for _, it := range catalog.All() {
		a, b := ours.MatchLabels(it.Labels), karpscheduling.NewLabelRequirements(it.Labels).Intersects(theirs) == nil
		if a != b {
			t.Errorf("%s: karpx %t, Karpenter %t", it.Name, a, b)
		}
		if a {
			n++
		}
	}
	if n == 0 {
		t.Fatal("no catalogue type matched: the comparison proves nothing")
	}
}
