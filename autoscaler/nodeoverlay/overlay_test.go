package nodeoverlay

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

func TestAdjustPrice(t *testing.T) {
	for _, tc := range []struct {
		price  float64
		change string
		want   float64
		err    bool
	}{
		{1, "", 1, false},
		{1, "0.25", 0.25, false},
		{1, "+0.5", 1.5, false},
		{1, "-0.4", 0.6, false},
		{1, "-2", 0, false}, // floored at zero
		{2, "+10%", 2.2, false},
		{2, "-25%", 1.5, false},
		{2, "-100%", 0, false},
		{2, "-101%", 0, true},
		{1, "abc", 0, true},
		{1, "+", 0, true},
		{1, "+1e3", 0, true},
		{1, "NaN", 0, true},
	} {
		got, err := AdjustPrice(tc.price, tc.change)
		if (err != nil) != tc.err || (!tc.err && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("AdjustPrice(%v, %q) = %v, %v; want %v (error %v)", tc.price, tc.change, got, err, tc.want, tc.err)
		}
	}
}

// overlay builds a NodeOverlay.
func overlay(name string, weight int32, price, adjustment string, capacity corev1.ResourceList, reqs ...v1alpha1.NodeSelectorRequirement) v1alpha1.NodeOverlay {
	o := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if weight != 0 {
		o.Spec.Weight = ptr.To(weight)
	}
	if price != "" {
		o.Spec.Price = ptr.To(price)
	}
	if adjustment != "" {
		o.Spec.PriceAdjustment = ptr.To(adjustment)
	}
	o.Spec.Capacity = capacity
	o.Spec.Requirements = reqs
	return o
}

func in(key string, values ...string) v1alpha1.NodeSelectorRequirement {
	return v1alpha1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

// instanceType builds a type with on-demand and spot offerings in two zones.
func instanceType(name, family string, od float64) *cloudprovider.InstanceType {
	it := &cloudprovider.InstanceType{
		Name:        name,
		Labels:      map[string]string{corev1.LabelInstanceTypeStable: name, "karpenter.k8s.aws/instance-family": family},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")},
	}
	for _, z := range []string{"us-east-1a", "us-east-1b"} {
		it.Offerings = append(it.Offerings,
			cloudprovider.Offering{Zone: z, CapacityType: "on-demand", PriceUSDPerHour: od, Available: true},
			cloudprovider.Offering{Zone: z, CapacityType: "spot", PriceUSDPerHour: od / 3, Available: true})
	}
	return it
}

func nodePool(name string, labels map[string]string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	return np
}

func pools() []Pool {
	its := []*cloudprovider.InstanceType{instanceType("m5.large", "m5", 0.096), instanceType("c5.large", "c5", 0.085)}
	return []Pool{
		{NodePool: nodePool("default", nil), InstanceTypes: its},
		{NodePool: nodePool("gpu", map[string]string{"team": "ml"}), InstanceTypes: its},
	}
}

func price(its []*cloudprovider.InstanceType, name, zone, ct string) (float64, string) {
	for _, it := range its {
		for _, o := range it.Offerings {
			if it.Name == name && o.Zone == zone && o.CapacityType == ct {
				return o.PriceUSDPerHour, o.PriceOverlay
			}
		}
	}
	return -1, ""
}

func TestPriceOverlaySelectsOfferings(t *testing.T) {
	ps := pools()
	ev := Evaluate(context.Background(), []v1alpha1.NodeOverlay{
		overlay("c5-expensive", 0, "1.5", "", nil, in(corev1.LabelInstanceTypeStable, "c5.large"), in(karpv1.CapacityTypeLabelKey, "on-demand")),
		overlay("spot-discount", 0, "", "-50%", nil, in(karpv1.CapacityTypeLabelKey, "spot"), in(corev1.LabelTopologyZone, "us-east-1b")),
	}, ps)
	if v := ev.Verdicts; v["c5-expensive"].Reason != "" || v["spot-discount"].Reason != "" {
		t.Fatalf("verdicts %+v; want both applied", v)
	}
	got := ev.Apply(ps[0].NodePool, ps[0].InstanceTypes)
	for _, tc := range []struct {
		it, zone, ct string
		want         float64
		by           string
	}{
		{"c5.large", "us-east-1a", "on-demand", 1.5, "c5-expensive"},
		{"c5.large", "us-east-1b", "on-demand", 1.5, "c5-expensive"},
		{"m5.large", "us-east-1a", "on-demand", 0.096, ""},
		{"m5.large", "us-east-1a", "spot", 0.032, ""},
		{"m5.large", "us-east-1b", "spot", 0.016, "spot-discount"},
		{"c5.large", "us-east-1b", "spot", 0.085 / 6, "spot-discount"},
	} {
		p, by := price(got, tc.it, tc.zone, tc.ct)
		if math.Abs(p-tc.want) > 1e-9 || by != tc.by {
			t.Errorf("%s %s %s: $%v by %q; want $%v by %q", tc.it, tc.zone, tc.ct, p, by, tc.want, tc.by)
		}
	}
	// The cloud's instance types are not changed.
	if p, by := price(ps[0].InstanceTypes, "c5.large", "us-east-1a", "on-demand"); p != 0.085 || by != "" {
		t.Errorf("the input type was changed: $%v by %q", p, by)
	}
}

func TestOverlayMatchesNodePoolLabels(t *testing.T) {
	ps := pools()
	ev := Evaluate(context.Background(), []v1alpha1.NodeOverlay{
		overlay("ml-only", 0, "9", "", nil, in("team", "ml")),
		overlay("default-only", 0, "", "+1", nil, in(karpv1.NodePoolLabelKey, "default"), in(corev1.LabelInstanceTypeStable, "m5.large")),
	}, ps)
	def, gpu := ev.Apply(ps[0].NodePool, ps[0].InstanceTypes), ev.Apply(ps[1].NodePool, ps[1].InstanceTypes)
	if p, _ := price(def, "c5.large", "us-east-1a", "on-demand"); p != 0.085 {
		t.Errorf("default c5.large: $%v; want the cloud's $0.085 (no team=ml label)", p)
	}
	if p, by := price(def, "m5.large", "us-east-1a", "on-demand"); math.Abs(p-1.096) > 1e-9 || by != "default-only" {
		t.Errorf("default m5.large: $%v by %q; want $1.096 by default-only", p, by)
	}
	if p, by := price(gpu, "c5.large", "us-east-1a", "spot"); p != 9 || by != "ml-only" {
		t.Errorf("gpu c5.large: $%v by %q; want $9 by ml-only", p, by)
	}
}

func TestHigherWeightWins(t *testing.T) {
	ps := pools()
	ev := Evaluate(context.Background(), []v1alpha1.NodeOverlay{
		overlay("low", 1, "5", "", nil),
		overlay("high", 10, "", "+100%", nil, in(corev1.LabelInstanceTypeStable, "m5.large")),
	}, ps)
	if ev.Verdicts["low"].Reason != "" || ev.Verdicts["high"].Reason != "" {
		t.Fatalf("verdicts %+v; different weights never conflict", ev.Verdicts)
	}
	got := ev.Apply(ps[0].NodePool, ps[0].InstanceTypes)
	if p, by := price(got, "m5.large", "us-east-1a", "on-demand"); math.Abs(p-0.192) > 1e-9 || by != "high" {
		t.Errorf("m5.large: $%v by %q; want $0.192 by high", p, by)
	}
	if p, by := price(got, "c5.large", "us-east-1a", "on-demand"); p != 5 || by != "low" {
		t.Errorf("c5.large: $%v by %q; want $5 by low", p, by)
	}
}

func TestEqualWeightConflict(t *testing.T) {
	ps := pools()
	ev := Evaluate(context.Background(), []v1alpha1.NodeOverlay{
		overlay("a", 5, "1", "", nil, in(corev1.LabelInstanceTypeStable, "m5.large")),
		overlay("b", 5, "2", "", nil, in(karpv1.CapacityTypeLabelKey, "on-demand")),
		overlay("c", 5, "3", "", nil, in(corev1.LabelInstanceTypeStable, "c5.large"), in(karpv1.CapacityTypeLabelKey, "spot")),
	}, ps)
	// Order: b, a (names descending): a overlaps b on m5.large on-demand.
	if v := ev.Verdicts["a"]; v.Reason != ReasonConflict || !strings.Contains(v.Message, `"b"`) {
		t.Errorf("a: %+v; want Conflict naming b", v)
	}
	if ev.Verdicts["b"].Reason != "" || ev.Verdicts["c"].Reason != "" {
		t.Errorf("verdicts %+v; b and c select disjoint offerings", ev.Verdicts)
	}
	got := ev.Apply(ps[0].NodePool, ps[0].InstanceTypes)
	// All or nothing: a applies nowhere, not even to m5.large spot.
	if p, by := price(got, "m5.large", "us-east-1a", "spot"); p != 0.032 || by != "" {
		t.Errorf("m5.large spot: $%v by %q; want the cloud's price (a conflicted)", p, by)
	}
	if p, by := price(got, "m5.large", "us-east-1a", "on-demand"); p != 2 || by != "b" {
		t.Errorf("m5.large on-demand: $%v by %q; want $2 by b", p, by)
	}
	if p, by := price(got, "c5.large", "us-east-1b", "spot"); p != 3 || by != "c" {
		t.Errorf("c5.large spot: $%v by %q; want $3 by c", p, by)
	}
}

func TestCapacityOverlay(t *testing.T) {
	fpga := corev1.ResourceName("example.com/fpga")
	nic := corev1.ResourceName("example.com/nic")
	ps := pools()
	ev := Evaluate(context.Background(), []v1alpha1.NodeOverlay{
		overlay("fpga-m5", 10, "", "", corev1.ResourceList{fpga: resource.MustParse("2")}, in("karpenter.k8s.aws/instance-family", "m5")),
		overlay("fpga-all", 1, "", "", corev1.ResourceList{fpga: resource.MustParse("1"), nic: resource.MustParse("4")}),
		// Same weight as fpga-all, other resource: no conflict.
		overlay("other", 1, "", "", corev1.ResourceList{"example.com/other": resource.MustParse("1")}, in(corev1.LabelInstanceTypeStable, "c5.large")),
		// Same weight as fpga-m5 and the same resource, after it by name
		// (names descending): conflict.
		overlay("fpga-a", 10, "", "", corev1.ResourceList{fpga: resource.MustParse("8")}),
		// Restricted: a well-known resource.
		overlay("cpu", 0, "", "", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}),
	}, ps)
	for name, want := range map[string]string{"fpga-m5": "", "fpga-all": "", "other": "", "fpga-a": ReasonConflict, "cpu": ReasonRuntimeValidation} {
		if got := ev.Verdicts[name].Reason; got != want {
			t.Errorf("%s: reason %q (%s); want %q", name, got, ev.Verdicts[name].Message, want)
		}
	}
	got := ev.Apply(ps[0].NodePool, ps[0].InstanceTypes)
	for _, it := range got {
		wantFPGA, by := "1", "fpga-all"
		if it.Name == "m5.large" {
			wantFPGA, by = "2", "fpga-m5"
		}
		if q := it.Allocatable[fpga]; q.String() != wantFPGA || it.CapacityOverlays[fpga] != by {
			t.Errorf("%s allocatable fpga %s by %q; want %s by %s", it.Name, q.String(), it.CapacityOverlays[fpga], wantFPGA, by)
		}
		if q := it.Capacity[nic]; q.String() != "4" {
			t.Errorf("%s capacity nic %s; want 4", it.Name, q.String())
		}
		if q := it.Allocatable[corev1.ResourceCPU]; q.String() != "1900m" {
			t.Errorf("%s cpu %s; want the cloud's 1900m", it.Name, q.String())
		}
		if _, ok := it.Capacity["example.com/other"]; ok != (it.Name == "c5.large") {
			t.Errorf("%s has example.com/other: %v", it.Name, ok)
		}
	}
	if _, ok := ps[0].InstanceTypes[0].Allocatable[fpga]; ok {
		t.Error("the cloud's instance type was changed")
	}
}

func TestRuntimeValidation(t *testing.T) {
	for name, o := range map[string]v1alpha1.NodeOverlay{
		"restricted key":     overlay("x", 0, "1", "", nil, in("kubernetes.io/hostname", "a")),
		"both prices":        overlay("x", 0, "1", "+1", nil),
		"bad price":          overlay("x", 0, "cheap", "", nil),
		"signed price":       overlay("x", 0, "+1", "", nil),
		"unsigned adjust":    overlay("x", 0, "", "10%", nil),
		"NotIn without vals": overlay("x", 0, "1", "", nil, v1alpha1.NodeSelectorRequirement{Key: "team", Operator: corev1.NodeSelectorOpNotIn}),
	} {
		ev := Evaluate(context.Background(), []v1alpha1.NodeOverlay{o}, pools())
		if v := ev.Verdicts["x"]; v.Reason != ReasonRuntimeValidation || v.Message == "" {
			t.Errorf("%s: %+v; want RuntimeValidation with a message", name, v)
		}
		if len(ev.Applied) != 0 {
			t.Errorf("%s: applied %v", name, ev.Names())
		}
	}
}

func TestStoreRefusesUnevaluatedNodePool(t *testing.T) {
	s := NewStore()
	np := nodePool("default", nil)
	its := []*cloudprovider.InstanceType{instanceType("m5.large", "m5", 0.096)}
	var unevaluated *UnevaluatedNodePoolError
	if _, err := s.Apply(np, its); !errors.As(err, &unevaluated) || unevaluated.NodePool != "default" {
		t.Fatalf("Apply before evaluation: %v; want UnevaluatedNodePoolError", err)
	}
	s.Update(Evaluate(context.Background(), []v1alpha1.NodeOverlay{overlay("x", 0, "7", "", nil)}, []Pool{{NodePool: np, InstanceTypes: its}}))
	got, err := s.Apply(np, its)
	if err != nil {
		t.Fatal(err)
	}
	if p, by := price(got, "m5.large", "us-east-1a", "on-demand"); p != 7 || by != "x" {
		t.Errorf("after evaluation: $%v by %q; want $7 by x", p, by)
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}}}
	if got, err := s.ApplyToNodeClaim(nc, its); err != nil || got[0].Offerings[0].PriceUSDPerHour != 7 {
		t.Errorf("ApplyToNodeClaim: %v, %v", got, err)
	}
	if _, err := s.Apply(nodePool("new", nil), its); !errors.As(err, &unevaluated) {
		t.Errorf("a NodePool created after the evaluation: %v; want UnevaluatedNodePoolError", err)
	}
}

func TestOrder(t *testing.T) {
	os := []Overlay{{Name: "a"}, {Name: "c", Weight: 1}, {Name: "b"}, {Name: "d", Weight: 5}}
	Order(os)
	var got []string
	for _, o := range os {
		got = append(got, o.Name)
	}
	if strings.Join(got, ",") != "d,c,b,a" {
		t.Errorf("Order: %v; want d,c,b,a (weight descending, then name descending)", got)
	}
}
