package capacity

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/capacity"
	"github.com/karpx/karpx/autoscaler/controllers/termination"
)

// Observer records a Node's allocatable; the AWS CloudProvider
// (autoscaler/aws/cloudprovider) implements it.
type Observer interface {
	ObserveNode(ctx context.Context, node *corev1.Node) (capacity.Key, bool, error)
}

// Controller records registered Nodes' allocatable. Create it with New.
type Controller struct {
	kube     client.Client
	observer Observer
}

// New returns a controller recording through observer.
func New(kube client.Client, observer Observer) *Controller {
	return &Controller{kube: kube, observer: observer}
}

// Register adds the controller to mgr: it watches Nodes that carry a
// provider ID and an allocatable.
func (c *Controller) Register(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named("nodeclass.capacity").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			n := o.(*corev1.Node)
			return n.Spec.ProviderID != "" && len(n.Status.Allocatable) > 0
		}))).Complete(c)
}

// Reconcile records one Node.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	key, ok, err := c.observer.ObserveNode(ctx, node)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Info("recording the Node's allocatable failed; retrying", "Node", node.Name, "transient", true, "error", err.Error())
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if !ok {
		return reconcile.Result{}, nil
	}
	// Only the Node's own NodeClaim, through the providerID index (a list
	// of every NodeClaim per Node event was 1 MB of garbage per event at
	// 2,000 NodeClaims, 2 GB while a restarted controller saw each Node
	// once; issue 12). The cache's objects are not copied; only the
	// matching one is, before it is changed.
	var claims karpv1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.MatchingFields{termination.NodeClaimProviderIDField: node.Spec.ProviderID}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	for i := range claims.Items {
		if equality.Semantic.DeepEqual(claims.Items[i].Status.Allocatable, node.Status.Allocatable) {
			continue
		}
		nc := claims.Items[i].DeepCopy()
		stored := nc.DeepCopy()
		nc.Status.Allocatable = node.Status.Allocatable.DeepCopy()
		if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		logr.FromContextOrDiscard(ctx).Info("recorded the registered Node's allocatable", "Node", node.Name, "NodeClaim", nc.Name,
			"NodePool", nc.Labels[karpv1.NodePoolLabelKey], "instanceType", key.InstanceType, "amiID", key.AMIID,
			"memory", node.Status.Allocatable.Memory().String(), "estimatedMemory", stored.Status.Allocatable.Memory().String())
	}
	return reconcile.Result{}, nil
}
