package pods

import (
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
