package termination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	podset "github.com/karpx/karpx/autoscaler/state/pods"
)

// DrainStatus says where a drain stands after one Drain call.
type DrainStatus struct {
	// Done is true when no pod that needs draining is left on the node.
	Done bool
	// Evicted is the number of evictions the API server accepted in this
	// call; Deleted the number of pods deleted because the termination
	// grace period ran out.
	Evicted, Deleted int
	// Blocked lists the pods ("namespace/name") whose eviction a
	// PodDisruptionBudget refused in this call (HTTP 429).
	Blocked []string
	// Waiting is the number of pods already terminating.
	Waiting int
	// Protected lists the pods ("namespace/name") not evicted because
	// their karpenter.sh/do-not-disrupt is active; the drain waits for
	// them (or for the terminationGracePeriod deadline).
	Protected []string
}

// Drainer removes pods from a node through the Eviction API.
type Drainer struct {
	kube     client.Client
	recorder record.EventRecorder
	clock    clock.PassiveClock
}

// NewDrainer returns a Drainer. kube must be a client whose cache indexes
// pods by clusterstate.PodNodeNameField.
func NewDrainer(kube client.Client, recorder record.EventRecorder, clk clock.PassiveClock) *Drainer {
	return &Drainer{kube: kube, recorder: recorder, clock: clk}
}

// Drain makes one pass over node's pods with the order and rules of
// Karpenter's terminator (Terminator.Drain,
// pkg/controllers/node/termination/terminator/terminator.go@v1.14.0).
// The pods drained are the drainable ones (drainable: not finished, not
// mirror pods, not tolerating the karpenter.sh/disrupted:NoSchedule taint,
// not stuck terminating a minute past their deletion time), in four tiers
// evicted one after the other (drainTiers): non-critical pods, non-critical
// DaemonSet pods, critical pods, critical DaemonSet pods; a tier starts
// only once the tiers before it are gone. A pod whose
// karpenter.sh/do-not-disrupt is active (pods.DoNotDisruptActive) is never
// evicted: the drain waits for it. When deadline is set (the NodeClaim's
// terminationGracePeriod), a drainable pod of any tier whose own grace
// period would end after the deadline is deleted instead, so that every
// pod, do-not-disrupt and PodDisruptionBudgets notwithstanding, is gone by
// then. Drain never blocks; call it again until Done. It returns an error
// when the pods cannot be listed or an eviction fails for a reason other
// than a PodDisruptionBudget (429) or the pod being gone (404).
func (d *Drainer) Drain(ctx context.Context, node *corev1.Node, deadline *time.Time) (DrainStatus, error) {
	var st DrainStatus
	var pods corev1.PodList
	if err := d.kube.List(ctx, &pods, client.MatchingFields{clusterstate.PodNodeNameField: node.Name}); err != nil {
		return st, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	now := d.clock.Now()
	var waiting []*corev1.Pod
	for i := range pods.Items {
		if pod := &pods.Items[i]; drainable(pod, now) {
			waiting = append(waiting, pod)
		}
	}
	if len(waiting) == 0 {
		st.Done = true
		return st, nil
	}
	log := logr.FromContextOrDiscard(ctx)
	var errs []error
	deleted := map[*corev1.Pod]bool{}
	if deadline != nil {
		for _, pod := range waiting {
			if !pod.DeletionTimestamp.IsZero() || now.Before(deadline.Add(-podGrace(pod))) {
				continue
			}
			if err := d.kube.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err))
				continue
			}
			deleted[pod] = true
			st.Deleted++
			log.Info("deleted pod: the NodeClaim's terminationGracePeriod ends before the pod's grace period would",
				"Pod", client.ObjectKeyFromObject(pod).String(), "deadline", deadline.UTC().Format(time.RFC3339))
			d.recorder.Eventf(pod, corev1.EventTypeNormal, "Disrupted",
				"Deleting the pod to accommodate the terminationTime %s of the node. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
				deadline.UTC().Format(time.RFC3339))
		}
	}
	for _, tier := range drainTiers(waiting) {
		if len(tier) == 0 {
			continue
		}
		for _, pod := range tier {
			if deleted[pod] {
				continue
			}
			if !pod.DeletionTimestamp.IsZero() {
				st.Waiting++
				continue
			}
			if active, _, _ := podset.DoNotDisruptActive(pod, now); active {
				st.Protected = append(st.Protected, pod.Namespace+"/"+pod.Name)
				continue
			}
			err := d.kube.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			})
			karpentermetrics.EvictionRequest(err)
			switch {
			case err == nil:
				st.Evicted++
				log.V(1).Info("evicted pod", "Pod", client.ObjectKeyFromObject(pod).String())
			case apierrors.IsNotFound(err):
			case apierrors.IsTooManyRequests(err):
				st.Blocked = append(st.Blocked, pod.Namespace+"/"+pod.Name)
			default:
				errs = append(errs, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		}
		break
	}
	if len(st.Blocked) > 0 {
		d.recorder.Eventf(node, corev1.EventTypeWarning, "FailedDraining",
			"a PodDisruptionBudget blocks the eviction of %d pod(s), first %s; retrying", len(st.Blocked), st.Blocked[0])
	}
	return st, errors.Join(errs...)
}

// stuckAfter is how long past its deletionTimestamp a terminating pod is
// waited for: Karpenter's minute (IsStuckTerminating,
// pkg/utils/pod/scheduling.go@v1.14.0), after which the node goes
// without it.
const stuckAfter = time.Minute

// drainable reports whether the drain must wait for pod, as Karpenter's
// IsWaitingEviction (pkg/utils/pod/scheduling.go@v1.14.0): not finished
// and not left by the drain (leftByDrain). DaemonSet and do-not-disrupt
// pods are drainable (the drain waits for them).
func drainable(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return !leftByDrain(pod, now)
}

// leftByDrain reports whether the drain leaves pod on the node, the
// negation of Karpenter's IsDrainable (pkg/utils/pod/
// scheduling.go@v1.14.0): a mirror pod, a pod tolerating the
// karpenter.sh/disrupted:NoSchedule taint (it could be scheduled straight
// back), or one terminating for more than stuckAfter past its
// deletionTimestamp. The volumes of such pods do not hold up the
// instance's termination (pendingVolumeAttachments).
func leftByDrain(pod *corev1.Pod, now time.Time) bool {
	if _, mirror := pod.Annotations[podset.MirrorPodAnnotationKey]; mirror {
		return true
	}
	if podset.ToleratesDisrupted(pod) {
		return true
	}
	return !pod.DeletionTimestamp.IsZero() && now.After(pod.DeletionTimestamp.Add(stuckAfter))
}

// drainTiers splits pods into Karpenter's four eviction tiers, in order
// (groupPodsByPriority, terminator.go@v1.14.0, after Kubernetes' graceful
// node shutdown): non-critical pods not owned by a DaemonSet, non-critical
// DaemonSet pods, critical pods not owned by a DaemonSet, critical
// DaemonSet pods. Critical means priorityClassName system-cluster-critical
// or system-node-critical.
func drainTiers(pods []*corev1.Pod) [4][]*corev1.Pod {
	var tiers [4][]*corev1.Pod
	for _, pod := range pods {
		i := 0
		if pod.Spec.PriorityClassName == "system-cluster-critical" || pod.Spec.PriorityClassName == "system-node-critical" {
			i = 2
		}
		if ownedByDaemonSet(pod) {
			i++
		}
		tiers[i] = append(tiers[i], pod)
	}
	return tiers
}

// ownedByDaemonSet reports whether an owner reference of pod is an
// apps/v1 DaemonSet (Karpenter's IsOwnedByDaemonSet).
func ownedByDaemonSet(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.APIVersion == "apps/v1" {
			return true
		}
	}
	return false
}

// podGrace is the pod's terminationGracePeriodSeconds (default 30 s, the
// API server's default).
func podGrace(pod *corev1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}
