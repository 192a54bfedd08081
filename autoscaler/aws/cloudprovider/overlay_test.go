package cloudprovider

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/nodeoverlay"
)

// TestSimCreateAppliesNodeOverlays: a NodeClaim marked by the scheduler
// as overlaid is launched from the overlaid instance types: the price
// overlay that makes c5.large ($0.085/h on EC2) cost $10/h makes the
// prioritized CreateFleet launch m5.large ($0.096/h), and a capacity
// overlay's resource is in the NodeClaim's status. Without the
// annotation (the control) EC2's lowest price picks c5.large; a NodeClaim
// of a NodePool the overlays were not evaluated against is refused.
func TestSimCreateAppliesNodeOverlays(t *testing.T) {
	e := newSimEnv(t)
	store := nodeoverlay.NewStore()
	e.cp.UseNodeOverlays(store)
	its, err := e.cp.GetInstanceTypes(context.Background(), nodePool("default"))
	if err != nil {
		t.Fatal(err)
	}
	dear := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "dear"}}
	dear.Spec.Price = ptr.To("10")
	dear.Spec.Requirements = []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large"}}}
	fpga := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "fpga"}}
	fpga.Spec.Capacity = corev1.ResourceList{"example.com/fpga": resource.MustParse("2")}
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{in(corev1.LabelInstanceTypeStable, "m5.large", "c5.large"), in(karpv1.CapacityTypeLabelKey, "on-demand")}

	var unevaluated *nodeoverlay.UnevaluatedNodePoolError
	marked := nodeClaim("early", reqs...)
	marked.Annotations = map[string]string{v1alpha1.PriceOverlayAppliedAnnotationKey: "true"}
	if _, err := e.cp.Create(context.Background(), marked); !errors.As(err, &unevaluated) {
		t.Fatalf("Create before the evaluation: %v; want UnevaluatedNodePoolError", err)
	}

	store.Update(nodeoverlay.Evaluate(context.Background(), []v1alpha1.NodeOverlay{dear, fpga}, []nodeoverlay.Pool{{NodePool: nodePool("default"), InstanceTypes: its}}))
	control, err := e.cp.Create(context.Background(), nodeClaim("control", reqs...))
	if err != nil {
		t.Fatal(err)
	}
	if got := control.Labels[corev1.LabelInstanceTypeStable]; got != "c5.large" {
		t.Errorf("unmarked NodeClaim launched %s; want EC2's cheapest, c5.large", got)
	}
	marked = nodeClaim("marked", reqs...)
	marked.Annotations = map[string]string{v1alpha1.PriceOverlayAppliedAnnotationKey: "true", v1alpha1.CapacityOverlayAppliedAnnotationKey: "true"}
	got, err := e.cp.Create(context.Background(), marked)
	if err != nil {
		t.Fatal(err)
	}
	if it := got.Labels[corev1.LabelInstanceTypeStable]; it != "m5.large" {
		t.Errorf("overlaid NodeClaim launched %s; want m5.large (c5.large priced at $10/h)", it)
	}
	for what, l := range map[string]corev1.ResourceList{"capacity": got.Status.Capacity, "allocatable": got.Status.Allocatable} {
		if q := l["example.com/fpga"]; q.String() != "2" {
			t.Errorf("status.%s example.com/fpga %s; want 2", what, q.String())
		}
	}
}
