package clusterstate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestRemainingSubtractsNodeClaimsOfThePool(t *testing.T) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: karpv1.NodePoolSpec{Limits: karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}}}
	claim := func(pool, cpu string) karpv1.NodeClaim {
		return karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
			Status: karpv1.NodeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	left := Remaining(np, []karpv1.NodeClaim{claim("p", "4"), claim("other", "4")})
	if left.Cpu().String() != "6" {
		t.Fatalf("remaining cpu = %s, want 6", left.Cpu())
	}
	if Remaining(&karpv1.NodePool{}, nil) != nil {
		t.Fatal("a NodePool without limits must be unlimited (nil)")
	}
}
