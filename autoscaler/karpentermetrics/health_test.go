package karpentermetrics

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestNodeClaimRepaired: a repair counts once in
// karpenter_nodeclaims_disrupted_total with reason "unhealthy" and once
// in karpenter_nodeclaims_unhealthy_disrupted_total with the condition
// snake-cased, Karpenter v1.14's label keys and the NodeClaim's image.
func TestNodeClaimRepaired(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		karpv1.NodePoolLabelKey: "repair-test", karpv1.CapacityTypeLabelKey: "spot"}},
		Status: karpv1.NodeClaimStatus{ImageID: "ami-0abc"}}
	disrupted := map[string]string{"reason": "unhealthy", "nodepool": "repair-test", "capacity_type": "spot"}
	unhealthy := map[string]string{"condition": "networking_ready", "nodepool": "repair-test", "capacity_type": "spot", "image_id": "ami-0abc"}
	count := func(name string, labels map[string]string) float64 { return max(0, counter(t, name, labels)) } // -1: no series yet
	d0, u0 := count("karpenter_nodeclaims_disrupted_total", disrupted), count("karpenter_nodeclaims_unhealthy_disrupted_total", unhealthy)
	NodeClaimRepaired(nc, "NetworkingReady")
	if d := count("karpenter_nodeclaims_disrupted_total", disrupted) - d0; d != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total%v grew by %v, want 1", disrupted, d)
	}
	if u := count("karpenter_nodeclaims_unhealthy_disrupted_total", unhealthy) - u0; u != 1 {
		t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total%v grew by %v, want 1", unhealthy, u)
	}
}
