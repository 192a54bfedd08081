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

	podset "github.com/karpx/karpx/autoscaler/state/pods"
)

// PodNodeNameField is the cache index of pods by spec.nodeName the Drainer
// lists with (registered by provisioning.IndexFields).
const PodNodeNameField = "spec.nodeName"

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
}

// Drainer removes pods from a node through the Eviction API.
type Drainer struct {
	kube     client.Client
	recorder record.EventRecorder
	clock    clock.PassiveClock
}

// NewDrainer returns a Drainer. kube must be a client whose cache indexes
// pods by PodNodeNameField.
func NewDrainer(kube client.Client, recorder record.EventRecorder, clk clock.PassiveClock) *Drainer {
	return &Drainer{kube: kube, recorder: recorder, clock: clk}
}

// Drain makes one pass over node's pods: it evicts every evictable pod not
// already terminating, pods that do not tolerate the disrupted taint
// first, and the others only once the first group is gone. When deadline
// is set (the NodeClaim's terminationGracePeriod), a pod whose own grace
// period would end after the deadline is deleted instead, so that every pod
// is gone by then. Drain never blocks; call it again until Done. It returns
// an error when the pods cannot be listed or an eviction fails for a reason
// other than a PodDisruptionBudget (429) or the pod being gone (404).
func (d *Drainer) Drain(ctx context.Context, node *corev1.Node, deadline *time.Time) (DrainStatus, error) {
	var st DrainStatus
	var pods corev1.PodList
	if err := d.kube.List(ctx, &pods, client.MatchingFields{PodNodeNameField: node.Name}); err != nil {
		return st, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	var first, last []*corev1.Pod
	firstLeft := false
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !podset.Evictable(pod) {
			continue
		}
		tolerates := podset.ToleratesDisrupted(pod)
		if !tolerates {
			firstLeft = true
		}
		if !pod.DeletionTimestamp.IsZero() {
			st.Waiting++
			continue
		}
		if tolerates {
			last = append(last, pod)
		} else {
			first = append(first, pod)
		}
	}
	group := first
	if !firstLeft {
		group = last
	}
	if len(group) == 0 && st.Waiting == 0 && len(last) == 0 {
		st.Done = true
		return st, nil
	}
	log := logr.FromContextOrDiscard(ctx)
	var errs []error
	for _, pod := range group {
		if deadline != nil && !d.clock.Now().Before(deadline.Add(-podGrace(pod))) {
			if err := d.kube.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err))
				continue
			}
			st.Deleted++
			log.Info("deleted pod: the NodeClaim's terminationGracePeriod ends before the pod's grace period would",
				"Pod", client.ObjectKeyFromObject(pod).String(), "deadline", deadline.UTC().Format(time.RFC3339))
			d.recorder.Eventf(pod, corev1.EventTypeWarning, "Disrupted",
				"deleted without eviction: node %s reached its terminationGracePeriod", node.Name)
			continue
		}
		err := d.kube.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		})
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
	if len(st.Blocked) > 0 {
		d.recorder.Eventf(node, corev1.EventTypeWarning, "FailedDraining",
			"a PodDisruptionBudget blocks the eviction of %d pod(s), first %s; retrying", len(st.Blocked), st.Blocked[0])
	}
	return st, errors.Join(errs...)
}

// podGrace is the pod's terminationGracePeriodSeconds (default 30 s, the
// API server's default).
func podGrace(pod *corev1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}
