package nodeoverlay

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog"
)

// catalogTypes is karpx's catalogue as instance types offered on-demand
// and spot in six zones.
func catalogTypes() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for _, c := range catalog.All() {
		if c.OnDemandPriceUSDPerHour == nil {
			continue
		}
		it := &cloudprovider.InstanceType{Name: c.Name, Labels: c.Labels, Capacity: c.Capacity(), Allocatable: c.Allocatable}
		for z := range 6 {
			zone := fmt.Sprintf("us-east-1%c", 'a'+z)
			it.Offerings = append(it.Offerings,
				cloudprovider.Offering{Zone: zone, CapacityType: "on-demand", PriceUSDPerHour: *c.OnDemandPriceUSDPerHour, Available: true},
				cloudprovider.Offering{Zone: zone, CapacityType: "spot", PriceUSDPerHour: *c.OnDemandPriceUSDPerHour / 3, Available: true})
		}
		out = append(out, it)
	}
	return out
}

// benchOverlays are ten overlays of the kinds docs/node-overlay.md shows.
func benchOverlays() []v1alpha1.NodeOverlay {
	var out []v1alpha1.NodeOverlay
	for i, fam := range []string{"m5", "c5", "r5", "m6i", "c6i", "r6i", "m7i", "c7i", "g5", "p4d"} {
		o := overlay("o-"+fam, int32(i+1), "", "-10%", nil, in("karpenter.k8s.aws/instance-family", fam))
		if i%3 == 0 {
			o.Spec.Capacity = corev1.ResourceList{"example.com/dev": resource.MustParse("1")}
		}
		out = append(out, o)
	}
	return out
}

// BenchmarkEvaluate is the controller's evaluation of ten overlays
// against the catalogue in one NodePool (per reconcile).
func BenchmarkEvaluate(b *testing.B) {
	ps := []Pool{{NodePool: nodePool("default", nil), InstanceTypes: catalogTypes()}}
	os := benchOverlays()
	b.ReportAllocs()
	for b.Loop() {
		Evaluate(context.Background(), os, ps)
	}
	b.ReportMetric(float64(len(ps[0].InstanceTypes)), "types")
}

// BenchmarkApply is the decorator's cost on every GetInstanceTypes call
// of a provisioning or disruption pass: ten overlays on the catalogue.
func BenchmarkApply(b *testing.B) {
	its := catalogTypes()
	np := nodePool("default", nil)
	ev := Evaluate(context.Background(), benchOverlays(), []Pool{{NodePool: np, InstanceTypes: its}})
	b.ReportAllocs()
	for b.Loop() {
		ev.Apply(np, its)
	}
	b.ReportMetric(float64(len(its)), "types")
}
