package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func unschedulable(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	return p
}

func TestIsProvisionable(t *testing.T) {
	now := metav1.Now()
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"unschedulable":      {unschedulable(&corev1.Pod{}), true},
		"not tried by sched": {&corev1.Pod{}, false},
		"bound":              {unschedulable(&corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}), false},
		"terminating":        {unschedulable(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}), false},
		"daemonset":          {unschedulable(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet"}}}}), false},
		"succeeded":          {unschedulable(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}), false},
	} {
		if got := IsProvisionable(tc.pod); got != tc.want {
			t.Errorf("%s: IsProvisionable = %v, want %v", name, got, tc.want)
		}
	}
}

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
