package pods

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// MirrorPodAnnotationKey marks a static pod's mirror in the API server
// (kubernetes.io/config.mirror, set by the kubelet). Such pods cannot be
// evicted: the kubelet recreates them from its manifest directory.
const MirrorPodAnnotationKey = corev1.MirrorPodAnnotationKey

// Reschedulable reports whether pod would need another node if its node
// went away: it is not finished, not being deleted, not a mirror pod and
// not owned by a DaemonSet (the DaemonSet controller follows nodes). This
// is Karpenter's definition; emptiness, consolidation and draining use it.
func Reschedulable(pod *corev1.Pod) bool {
	return Evictable(pod) && pod.DeletionTimestamp.IsZero()
}

// Evictable reports whether draining a node must remove pod: it is not
// finished (Succeeded or Failed), not a mirror pod and not owned by a
// DaemonSet. A pod already being deleted is evictable but needs no new
// eviction; the drain waits for it.
func Evictable(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			return false
		}
	}
	return true
}

// ToleratesDisrupted reports whether pod tolerates the
// karpenter.sh/disrupted:NoSchedule taint. Such pods could be scheduled
// straight back onto the draining node, so they are evicted last.
func ToleratesDisrupted(pod *corev1.Pod) bool {
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &karpv1.DisruptedNoScheduleTaint, false)
}

// DoNotDisruptActive reports whether a pod's karpenter.sh/do-not-disrupt
// holds its node at now, as Karpenter v1.14 reads it (IsDoNotDisruptActive,
// pkg/utils/pod/scheduling.go@v1.14.0): "true" always; a positive Go
// duration ("30m", "1h30m") while the pod has run less than that since
// status.startTime (always while it has no start time), until is then the
// end; any other value is no protection and err says why (Karpenter
// ignores it too and emits InvalidDoNotDisruptAnnotation).
func DoNotDisruptActive(pod *corev1.Pod, now time.Time) (active bool, until time.Time, err error) {
	value, ok := pod.Annotations[karpv1.DoNotDisruptAnnotationKey]
	if !ok {
		return false, time.Time{}, nil
	}
	if value == "true" {
		return true, time.Time{}, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 {
		return false, time.Time{}, fmt.Errorf("pod %s/%s: annotation %s=%q is neither \"true\" nor a positive duration such as \"30m\"; ignored",
			pod.Namespace, pod.Name, karpv1.DoNotDisruptAnnotationKey, value)
	}
	if pod.Status.StartTime == nil {
		return true, time.Time{}, nil
	}
	until = pod.Status.StartTime.Add(d)
	return now.Before(until), until, nil
}

// AwaitingScheduler reports whether pod is waiting for kube-scheduler's
// first verdict: not bound to a Node, not being deleted, not finished, and
// without a PodScheduled=False condition (kube-scheduler sets one, reason
// Unschedulable or SchedulingGated, as soon as it cannot bind the pod).
// Such a pod is about to be bound to a node of kube-scheduler's choosing,
// or marked unschedulable within moments.
func AwaitingScheduler(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || !pod.DeletionTimestamp.IsZero() ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return false
		}
	}
	return true
}
