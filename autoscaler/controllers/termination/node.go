package termination

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// NodeClaimProviderIDField is the cache index of NodeClaims by
// status.providerID (registered by lifecycle.IndexFields).
const NodeClaimProviderIDField = "status.providerID"

// DrainRequeue is how often a draining Node is looked at again while pods
// are leaving or a PodDisruptionBudget blocks them. Pod deletions wake the
// controller sooner.
const DrainRequeue = 2 * time.Second

// NodeController drains and terminates Nodes that are being deleted and
// carry the karpenter.sh/termination finalizer.
type NodeController struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	drainer  *Drainer
	clock    clock.PassiveClock
}

// NewNodeController returns a NodeController. kube must be a cached client
// whose cache indexes pods by PodNodeNameField and NodeClaims by
// NodeClaimProviderIDField.
func NewNodeController(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.PassiveClock) *NodeController {
	return &NodeController{kube: kube, cloud: cloud, recorder: recorder, clock: clk, drainer: NewDrainer(kube, recorder, clk)}
}

// Register adds the controller to mgr. It reconciles Nodes being deleted
// and is woken when a pod on such a Node goes away.
func (c *NodeController) Register(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named("node.termination").
		WithOptions(controller.Options{MaxConcurrentReconciles: 64}).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return !o.GetDeletionTimestamp().IsZero()
		}))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := o.(*corev1.Pod).Spec.NodeName; n != "" && !o.GetDeletionTimestamp().IsZero() {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
			}
			return nil
		})).
		Complete(c)
}

// Reconcile advances the termination of one Node by as many steps as the
// world allows (see the package documentation).
func (c *NodeController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	nc, err := c.nodeClaimFor(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("Node", node.Name)
	if nc != nil {
		log = log.WithValues("NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey])
	}
	ctx = budget.WithPriority(logr.NewContext(ctx, log), budget.Critical)

	// 1. The NodeClaim leaves with its Node.
	if nc != nil && nc.DeletionTimestamp.IsZero() {
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting NodeClaim %s of deleted Node: %w", nc.Name, err)
		}
		log.Info("Node deleted; deleting its NodeClaim")
		if err := c.kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	// 2. Nothing new lands on the Node.
	if err := SetDisruptedTaint(ctx, c.kube, node, true); err != nil {
		return reconcile.Result{}, err
	}
	// 3. Drain.
	deadline, err := c.deadline(ctx, node, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	st, err := c.drainer.Drain(ctx, node, deadline)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !st.Done {
		log.V(1).Info("draining", "evicted", st.Evicted, "deleted", st.Deleted, "blocked", len(st.Blocked), "terminating", st.Waiting)
		return reconcile.Result{RequeueAfter: DrainRequeue}, nil
	}
	// 4. Terminate the instance.
	if node.Spec.ProviderID != "" {
		gone, err := TerminateInstance(ctx, c.cloud, nc, node.Spec.ProviderID)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !gone {
			return reconcile.Result{RequeueAfter: DrainRequeue}, nil
		}
	}
	// 5. Release the Node.
	stored := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log.Info("drained and terminated; Node released", "providerID", node.Spec.ProviderID)
	return reconcile.Result{}, nil
}

// TerminateInstance terminates the instance behind providerID (nc may be
// nil when the NodeClaim is already gone) and reports whether EC2 reports
// it shutting-down or terminated. It returns cloud errors other than "not
// found" so the caller retries; the instance is never assumed gone on an
// error.
func TerminateInstance(ctx context.Context, cloud cloudprovider.CloudProvider, nc *karpv1.NodeClaim, providerID string) (bool, error) {
	view := nc
	if view == nil || view.Status.ProviderID == "" {
		view = &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
		if nc != nil {
			view.Name, view.Labels = nc.Name, nc.Labels
		}
	}
	if err := cloud.Delete(ctx, view); err != nil {
		if cloudprovider.IsNodeClaimNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("terminating instance %s: %w", providerID, err)
	}
	got, err := cloud.Get(ctx, providerID)
	if err != nil {
		if cloudprovider.IsNodeClaimNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("checking instance %s: %w", providerID, err)
	}
	// The cloud view of a shutting-down instance has a deletion timestamp.
	return !got.DeletionTimestamp.IsZero(), nil
}

// SetDisruptedTaint adds (on) or removes karpenter.sh/disrupted:NoSchedule
// on node, with an optimistic lock, and does nothing when node already is
// as asked (any taint with the disrupted key counts). It returns the
// patch's error. Termination and disruption both taint through it.
func SetDisruptedTaint(ctx context.Context, kube client.Client, node *corev1.Node, on bool) error {
	has := false
	var kept []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			has = true
			continue
		}
		kept = append(kept, t)
	}
	if has == on {
		return nil
	}
	stored := node.DeepCopy()
	if on {
		node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	} else {
		node.Spec.Taints = kept
	}
	if err := kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("setting %s on Node %s to %v: %w", karpv1.DisruptedTaintKey, node.Name, on, err)
	}
	return nil
}

// deadline is when the remaining pods are deleted rather than evicted: the
// earliest deletion timestamp of the Node and its NodeClaim plus the
// NodeClaim's spec.terminationGracePeriod; nil when none is set. It is
// recorded on the NodeClaim as karpenter.sh/nodeclaim-termination-timestamp,
// as Karpenter does, so users can see it.
func (c *NodeController) deadline(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim) (*time.Time, error) {
	if nc == nil || nc.Spec.TerminationGracePeriod == nil {
		return nil, nil
	}
	start := node.DeletionTimestamp.Time
	if !nc.DeletionTimestamp.IsZero() && nc.DeletionTimestamp.Before(node.DeletionTimestamp) {
		start = nc.DeletionTimestamp.Time
	}
	d := start.Add(nc.Spec.TerminationGracePeriod.Duration)
	stamp := d.UTC().Format(time.RFC3339)
	if nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] != stamp {
		stored := nc.DeepCopy()
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, karpv1.NodeClaimTerminationTimestampAnnotationKey, stamp)
		if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("recording the termination deadline on NodeClaim %s: %w", nc.Name, err)
		}
	}
	return &d, nil
}

// nodeClaimFor returns the NodeClaim with node's providerID, or nil.
func (c *NodeController) nodeClaimFor(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.MatchingFields{NodeClaimProviderIDField: node.Spec.ProviderID}); err != nil {
		return nil, fmt.Errorf("listing NodeClaims with providerID %s: %w", node.Spec.ProviderID, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}
