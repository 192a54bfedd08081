package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestToleratesDisrupted(t *testing.T) {
	if ToleratesDisrupted(pod("a")) {
		t.Error("a pod without tolerations tolerates the disrupted taint")
	}
	if !ToleratesDisrupted(pod("b", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} })) {
		t.Error("a pod tolerating everything does not tolerate the disrupted taint")
	}
	if !ToleratesDisrupted(pod("c", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})) {
		t.Error("a pod tolerating the disrupted key does not tolerate it")
	}
}

func TestReschedulable(t *testing.T) {
	now := metav1.Now()
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"running":     {pod("a"), true},
		"terminating": {pod("b", func(p *corev1.Pod) { p.DeletionTimestamp = &now }), false},
		"failed":      {pod("c", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		"mirror":      {pod("d", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }), false},
		"daemonset": {pod("e", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Controller: ptr.To(true)}}
		}), false},
		"replicaset": {pod("f", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Controller: ptr.To(true)}}
		}), true},
	} {
		if got := Reschedulable(tc.pod); got != tc.want {
			t.Errorf("%s: Reschedulable = %v, want %v", name, got, tc.want)
		}
	}
}

func TestAwaitingScheduler(t *testing.T) {
	now := metav1.Now()
	pending := func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }
	judged := func(reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason}}
		}
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"new, no condition":         {pod("a", pending), true},
		"bound":                     {pod("b", pending, func(p *corev1.Pod) { p.Spec.NodeName = "n" }), false},
		"unschedulable":             {pod("c", pending, judged(corev1.PodReasonUnschedulable)), false},
		"scheduling gated":          {pod("d", pending, judged(corev1.PodReasonSchedulingGated)), false},
		"terminating":               {pod("e", pending, func(p *corev1.Pod) { p.DeletionTimestamp = &now }), false},
		"failed before any binding": {pod("f", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
	} {
		if got := AwaitingScheduler(tc.pod); got != tc.want {
			t.Errorf("%s: AwaitingScheduler = %v, want %v", name, got, tc.want)
		}
	}
}
