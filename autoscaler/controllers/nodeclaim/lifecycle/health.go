package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ec2v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
)

// ConditionTypeNodeNotReady is the NodeClaim condition that reports a Node
// NotReady for longer than Options.NodeNotReadyThreshold.
const ConditionTypeNodeNotReady = "NodeNotReady"

// watchReady reports, on an initialised NodeClaim, a Node NotReady for
// longer than the threshold (condition NodeNotReady=True and an event) and
// clears the report when it is Ready again. It never deletes anything.
func (c *Controller) watchReady(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (reconcile.Result, error) {
	since, notReady := notReadySince(node)
	cond := nc.StatusConditions().Get(ConditionTypeNodeNotReady)
	reported := cond != nil && cond.IsTrue()
	stored := nc.DeepCopy()
	switch {
	case !notReady && reported:
		nc.StatusConditions().SetFalse(ConditionTypeNodeNotReady, "NodeReady", "Node is Ready")
	case !notReady:
		return reconcile.Result{}, nil
	case c.opts.Clock.Now().Sub(since) < c.opts.NodeNotReadyThreshold:
		return reconcile.Result{RequeueAfter: c.opts.NodeNotReadyThreshold - c.opts.Clock.Now().Sub(since)}, nil
	case reported:
		return reconcile.Result{}, nil
	default:
		msg := fmt.Sprintf("Node %s NotReady since %s (longer than %s); not replaced: check kubelet on the instance %s, or delete the NodeClaim to replace it",
			node.Name, since.UTC().Format(time.RFC3339), c.opts.NodeNotReadyThreshold, nc.Status.ProviderID)
		nc.StatusConditions().SetTrueWithReason(ConditionTypeNodeNotReady, "NotReadyTooLong", msg)
		logr.FromContextOrDiscard(ctx).Info("Node NotReady too long; reported, not replaced", "Node", node.Name, "since", since.UTC().Format(time.RFC3339))
		c.recorder.Event(nc, corev1.EventTypeWarning, "NodeNotReady", msg)
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.patchStatus(ctx, nc, stored))
}

// notReadySince returns when node's Ready condition left True, and whether
// it is not True now (a Node without the condition counts from creation).
func notReadySince(node *corev1.Node) (time.Time, bool) {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.LastTransitionTime.Time, cond.Status != corev1.ConditionTrue
		}
	}
	return node.CreationTimestamp.Time, true
}

// healthKey returns the (NodePool, EC2NodeClass) pair of nc and their
// current generations; ok is false when either is gone.
func (c *Controller) healthKey(ctx context.Context, nc *karpv1.NodeClaim) (launchhealth.Key, launchhealth.Generations, bool) {
	var np karpv1.NodePool
	if err := c.kube.Get(ctx, types.NamespacedName{Name: nc.Labels[karpv1.NodePoolLabelKey]}, &np); err != nil || nc.Spec.NodeClassRef == nil {
		return launchhealth.Key{}, launchhealth.Generations{}, false
	}
	var class ec2v1.EC2NodeClass
	if err := c.kube.Get(ctx, types.NamespacedName{Name: nc.Spec.NodeClassRef.Name}, &class); err != nil {
		return launchhealth.Key{}, launchhealth.Generations{}, false
	}
	return launchhealth.Key{NodePool: np.Name, NodeClass: class.Name},
		launchhealth.Generations{NodePool: np.Generation, NodeClass: class.Generation}, true
}

// recordFailure reports a persistent failure of nc's pair to the launch
// health tracker and, when it pauses the pair, tells the user on the
// NodePool which EC2NodeClass field to look at.
func (c *Controller) recordFailure(ctx context.Context, nc *karpv1.NodeClaim, cause, message string) {
	key, gens, ok := c.healthKey(ctx, nc)
	if !ok {
		return
	}
	state := c.health.Failure(key, gens, cause, message)
	if state.PausedUntil.IsZero() {
		return
	}
	var np karpv1.NodePool
	if err := c.kube.Get(ctx, types.NamespacedName{Name: key.NodePool}, &np); err != nil {
		return
	}
	logr.FromContextOrDiscard(ctx).Info("pausing provisioning for NodePool", "EC2NodeClass", key.NodeClass,
		"cause", cause, "consecutive", state.Consecutive, "until", state.PausedUntil.UTC().Format(time.RFC3339))
	c.recorder.Eventf(&np, corev1.EventTypeWarning, "ProvisioningPaused",
		"%d consecutive launches with EC2NodeClass %q failed with %s; provisioning paused until %s or until the NodePool or EC2NodeClass changes. Fix: %s",
		state.Consecutive, key.NodeClass, cause, state.PausedUntil.UTC().Format(time.RFC3339), launchhealth.FixFor(cause, key.NodeClass))
}
