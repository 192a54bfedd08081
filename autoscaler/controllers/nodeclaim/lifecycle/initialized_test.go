package lifecycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestNotInitialized(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	cilium := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoExecute}
	gpuClaim := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{Resources: karpv1.ResourceRequirements{
		Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
	for name, tc := range map[string]struct {
		nc   *karpv1.NodeClaim
		node corev1.Node
		want string // substring of the reason; "" = initialised
	}{
		"ready":      {&karpv1.NodeClaim{}, corev1.Node{Status: corev1.NodeStatus{Conditions: ready}}, ""},
		"not ready":  {&karpv1.NodeClaim{}, corev1.Node{}, "not Ready"},
		"startup":    {&karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{StartupTaints: []corev1.Taint{cilium}}}, corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{cilium}}, Status: corev1.NodeStatus{Conditions: ready}}, "startup taint"},
		"ephemeral":  {&karpv1.NodeClaim{}, corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}}, Status: corev1.NodeStatus{Conditions: ready}}, "not-ready"},
		"gpu absent": {gpuClaim, corev1.Node{Status: corev1.NodeStatus{Conditions: ready}}, "nvidia.com/gpu"},
		"gpu ready":  {gpuClaim, corev1.Node{Status: corev1.NodeStatus{Conditions: ready, Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}, ""},
	} {
		got := notInitialized(tc.nc, &tc.node)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: notInitialized = %q, want %q", name, got, tc.want)
		}
	}
}
