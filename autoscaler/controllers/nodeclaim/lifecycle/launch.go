package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
)

// launchFailures counts consecutive persistent launch failures of one
// NodeClaim and when the next attempt is due. Kept in memory: after a
// restart a NodeClaim gets one immediate attempt, then backs off again.
type launchFailures struct {
	count int
	next  time.Time
}

// launch creates the instance of nc, or takes the one an earlier attempt
// created, and records it in nc's status.
func (c *Controller) launch(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	c.mu.Lock()
	launched := c.launched[nc.UID]
	c.mu.Unlock()
	if launched == nil {
		var err error
		if launched, err = c.cloud.Create(c.opts.Latency.ForLaunch(ctx, nc.Name), nc); err != nil {
			return c.launchFailed(ctx, nc, err)
		}
		c.mu.Lock()
		delete(c.failures, nc.UID)
		c.launched[nc.UID] = launched
		c.mu.Unlock()
	}

	stored := nc.DeepCopy()
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for k, v := range launched.Labels {
		nc.Labels[k] = v
	}
	for k, v := range launched.Annotations {
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, k, v)
	}
	if err := c.patchMetadata(ctx, nc, stored); err != nil {
		// The instance exists and is tagged with this NodeClaim's name; the
		// next attempt finds it through Create's idempotency or garbage
		// collection, so nothing leaks.
		return reconcile.Result{}, fmt.Errorf("recording labels of launched instance %s: %w", launched.Status.ProviderID, err)
	}
	stored = nc.DeepCopy()
	nc.Status.ProviderID = launched.Status.ProviderID
	nc.Status.ImageID = launched.Status.ImageID
	nc.Status.Capacity = launched.Status.Capacity
	nc.Status.Allocatable = launched.Status.Allocatable
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeRegistered, "AwaitingNode", "waiting for the Node to join")
	if err := c.patchStatus(ctx, nc, stored); err != nil {
		return reconcile.Result{}, fmt.Errorf("recording launch of %s: %w", launched.Status.ProviderID, err)
	}
	c.wrote(nc, phaseLaunched)
	log.Info("launched", "providerID", nc.Status.ProviderID,
		"instanceType", nc.Labels[corev1.LabelInstanceTypeStable], "zone", nc.Labels[corev1.LabelTopologyZone],
		"capacityType", nc.Labels[karpv1.CapacityTypeLabelKey])
	// No event: Karpenter emits none on a launch, and the Launched
	// condition, the status and this log line carry what one would (one
	// API request less per NodeClaim).
	return reconcile.Result{RequeueAfter: c.opts.RegistrationTTL}, nil
}

// launchFailed classifies a Create error. ICE deletes the NodeClaim so the
// provisioner re-plans with other offerings; persistent errors are recorded
// on the NodeClaim and retried after an exponential backoff; anything else
// is transient and retried with the controller's rate limiter.
func (c *Controller) launchFailed(ctx context.Context, nc *karpv1.NodeClaim, err error) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	var ice *cloudprovider.InsufficientCapacityError
	var launchErr *cloudprovider.LaunchError
	var notReady *cloudprovider.NodeClassNotReadyError
	switch {
	case errors.As(err, &ice):
		log.Info("no capacity for any offering; deleting NodeClaim so the provisioner picks others", "error", err.Error())
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "InsufficientCapacity", "%v", err)
		if err := c.kube.Delete(ctx, nc); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		karpentermetrics.NodeClaimDisrupted(nc, karpentermetrics.ReasonInsufficientCapacity)
		return reconcile.Result{}, nil
	case errors.As(err, &launchErr), errors.As(err, &notReady):
		reason, code := "LaunchFailed", ""
		if launchErr != nil {
			code = launchErr.Code
		} else {
			reason = "NodeClassNotReady"
		}
		c.mu.Lock()
		f := c.failures[nc.UID]
		f.count++
		n := f.count
		wait := launchhealth.Backoff(c.opts.LaunchBackoffBase, c.opts.LaunchBackoffMax, n)
		f.next = c.opts.Clock.Now().Add(wait)
		c.failures[nc.UID] = f
		c.mu.Unlock()
		log.Info("launch failed; backing off", "reason", reason, "code", code, "attempt", n, "retryIn", wait.String(), "error", err.Error())
		c.recorder.Eventf(nc, corev1.EventTypeWarning, reason, "attempt %d, retrying in %s: %v", n, wait, err)
		cause := reason
		if code != "" {
			cause += "/" + code
		}
		c.recordFailure(ctx, nc, cause, err.Error())
		stored := nc.DeepCopy()
		nc.StatusConditions().SetFalse(karpv1.ConditionTypeLaunched, reason, truncate(err.Error(), 1024))
		if perr := c.patchStatus(ctx, nc, stored); perr != nil {
			return reconcile.Result{}, client.IgnoreNotFound(perr)
		}
		return reconcile.Result{RequeueAfter: wait}, nil
	default:
		return reconcile.Result{}, fmt.Errorf("launching: %w", err)
	}
}

// patchMetadata writes nc's labels and annotations as a JSON merge patch
// from stored, and writes nothing when neither changed. It returns the API
// server's error.
func (c *Controller) patchMetadata(ctx context.Context, nc, stored *karpv1.NodeClaim) error {
	if equality.Semantic.DeepEqual(stored.Labels, nc.Labels) && equality.Semantic.DeepEqual(stored.Annotations, nc.Annotations) {
		return nil
	}
	return c.kube.Patch(ctx, nc, client.MergeFrom(stored))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
