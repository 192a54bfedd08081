package explain

import (
	"bytes"
	"strings"
	"testing"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/catalog"
)

// catalogPrice is the catalogue's on-demand price of name (USD per hour).
func catalogPrice(name string) float64 {
	it, _ := catalog.Get(name)
	return *it.OnDemandPriceUSDPerHour
}

// evaluated marks o as the controller leaves it: ValidationSucceeded
// with status.
func evaluated(o v1alpha1.NodeOverlay, st metav1.ConditionStatus, reason string) v1alpha1.NodeOverlay {
	o.Status.Conditions = append(o.Status.Conditions, status.Condition{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: st, Reason: reason})
	return o
}

func priceOverlay(name string, weight int32, price string, instanceType string) v1alpha1.NodeOverlay {
	o := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}}
	o.Spec.Weight = ptr.To(weight)
	o.Spec.Price = ptr.To(price)
	o.Spec.Requirements = []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}}}
	return o
}

// overlaySnapshot has one NodePool limited to two instance types; the
// cheaper, by the catalogue, is cheap.
func overlaySnapshot(overlays ...v1alpha1.NodeOverlay) (*Snapshot, string, string) {
	cheap, dear := "m5.large", "m6i.large"
	if catalogPrice(cheap) > catalogPrice(dear) {
		cheap, dear = dear, cheap
	}
	np := nodePool("general", 0, "default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, cheap, dear),
		req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))
	return &Snapshot{
		Pod:            pendingPod("1", "1Gi"),
		NodePools:      []karpv1.NodePool{*np},
		EC2NodeClasses: []karpxv1.EC2NodeClass{ec2NodeClass("default", "us-east-1a")},
		NodeOverlays:   overlays,
	}, cheap, dear
}

func TestExplainShowsTheOverlaidPrice(t *testing.T) {
	_, cheap, dear := overlaySnapshot()
	s, _, _ := overlaySnapshot(
		evaluated(priceOverlay("make-cheap-dear", 10, "9.5", cheap), metav1.ConditionTrue, "ValidationSucceeded"),
		evaluated(priceOverlay("a-rival", 10, "0.01", cheap), metav1.ConditionFalse, "Conflict"),
	)
	ex := Explain(s)
	r := result(t, ex, "general")
	if !r.CanLaunch || r.InstanceType != dear || r.PriceOverlay != "" {
		t.Fatalf("general: %+v; want %s at the catalogue price (the overlay made %s dearer)", r, dear, cheap)
	}
	if len(r.InstanceTypes) != 2 || r.InstanceTypes[1] != cheap {
		t.Errorf("types %v; want %s last", r.InstanceTypes, cheap)
	}
	want := map[string]NodeOverlayResult{
		"make-cheap-dear": {Name: "make-cheap-dear", Weight: 10, Applied: true, Condition: "True"},
		"a-rival":         {Name: "a-rival", Weight: 10, Reason: "Conflict", Condition: "False: Conflict"},
	}
	if len(ex.NodeOverlays) != 2 {
		t.Fatalf("overlays %+v", ex.NodeOverlays)
	}
	for _, got := range ex.NodeOverlays {
		w := want[got.Name]
		if got.Applied != w.Applied || got.Condition != w.Condition || got.Reason != w.Reason || got.Weight != w.Weight {
			t.Errorf("%s: %+v; want %+v", got.Name, got, w)
		}
	}

	// An overlay that makes the dearer type cheap is shown as the price.
	s, _, _ = overlaySnapshot(evaluated(priceOverlay("discount", 0, "0.001", dear), metav1.ConditionTrue, "ValidationSucceeded"))
	ex = Explain(s)
	r = result(t, ex, "general")
	if r.InstanceType != dear || r.PriceUSDPerHour != 0.001 || r.PriceOverlay != "discount" || r.CatalogPriceUSDPerHour != catalogPrice(dear) {
		t.Fatalf("general: %+v; want %s at $0.001 set by discount", r, dear)
	}
	var out bytes.Buffer
	o := &Options{}
	o.Out = &out
	if err := o.print(ex); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"$0.0010 (NodeOverlay discount)", "price set by NodeOverlay discount; catalogue $", "NodeOverlays (weight descending"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestExplainIgnoresUnevaluatedOverlays(t *testing.T) {
	s, cheap, _ := overlaySnapshot(priceOverlay("make-cheap-dear", 10, "9.5", "m5.large"), priceOverlay("x", 1, "9.5", "m6i.large"))
	ex := Explain(s)
	if r := result(t, ex, "general"); r.InstanceType != cheap || r.PriceOverlay != "" {
		t.Errorf("general: %+v; want the catalogue's cheapest, %s (no controller evaluated the overlays)", r, cheap)
	}
	if !strings.Contains(strings.Join(ex.Notes, "\n"), NodeOverlayNote) {
		t.Errorf("notes %v lack NodeOverlayNote", ex.Notes)
	}
	for _, r := range ex.NodeOverlays {
		if r.Applied {
			t.Errorf("%s shown as applied", r.Name)
		}
	}
}

func TestExplainCapacityOverlay(t *testing.T) {
	fpga := corev1.ResourceName("example.com/fpga")
	o := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "fpga"}}
	o.Spec.Capacity = corev1.ResourceList{fpga: resource.MustParse("1")}
	s, _, _ := overlaySnapshot(evaluated(o, metav1.ConditionTrue, "ValidationSucceeded"))
	s.Pod.Spec.Containers[0].Resources.Requests[fpga] = resource.MustParse("1")
	s.Pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fpga: resource.MustParse("1")}
	r := result(t, Explain(s), "general")
	if !r.CanLaunch || r.CapacityOverlays[fpga] != "fpga" {
		t.Fatalf("general: %+v; want a launch whose type got %s from NodeOverlay fpga", r, fpga)
	}
	s.NodeOverlays = nil
	if r := result(t, Explain(s), "general"); r.CanLaunch {
		t.Errorf("without the overlay: %+v; no type has %s", r, fpga)
	}
}
