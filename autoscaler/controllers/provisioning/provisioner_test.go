package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
