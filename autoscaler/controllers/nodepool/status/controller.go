package status

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ec2v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
)

// ResyncPeriod re-evaluates every NodePool even without events, so a
// launch pause that expires shows up as healthy again.
const ResyncPeriod = 30 * time.Second

// Controller reconciles NodePool status.
type Controller struct {
	kube     client.Client
	health   *launchhealth.Tracker
	recorder record.EventRecorder
}

// New returns a NodePool status controller reading launch health from
// health. A nil recorder records no events (NodeClassNotReady when a
// pool's EC2NodeClass turns not ready).
func New(kube client.Client, health *launchhealth.Tracker, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, health: health, recorder: recorder}
}

// Register adds the controller to mgr.
func (c *Controller) Register(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named("nodepool.status").
		For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, nodePoolAfter(NodeClaimCoalesce)).
		Watches(&ec2v1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(c.nodePoolsOf)).
		Complete(c)
}

// NodeClaimCoalesce is how long a NodeClaim event waits before its
// NodePool's status is recomputed; the events of that second share one
// reconcile. Without it a controller that restarts in a cluster of 2,000
// NodeClaims listed the pool's NodeClaims once per NodeClaim (2 GB of
// garbage, 60% of everything it allocated; issue 12).
const NodeClaimCoalesce = time.Second

// nodePoolAfter returns a handler that adds the NodePool of a NodeClaim
// (its karpenter.sh/nodepool label) to the queue after delay: the queue
// holds a request once, so every event of a burst lands in one reconcile.
func nodePoolAfter(delay time.Duration) handler.EventHandler {
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if np := o.GetLabels()[karpv1.NodePoolLabelKey]; np != "" {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: np}}, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.ObjectOld, q)
			add(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
	}
}

func (c *Controller) nodePoolsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list karpv1.NodePoolList
	if err := c.kube.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, np := range list.Items {
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
		}
	}
	return out
}

// launched reports whether nc's Launched condition is True, without
// modifying nc.
func launched(nc *karpv1.NodeClaim) bool {
	for _, cond := range nc.Status.Conditions {
		if cond.Type == karpv1.ConditionTypeLaunched {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}

// Reconcile recomputes one NodePool's status: resources and nodes of its
// launched NodeClaims and its conditions. It returns the read or patch
// error.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := np.DeepCopy()

	// Read-only: the cache's own objects, not copies (a reconcile per
	// NodeClaim event copied every NodeClaim of the pool; issue 12's
	// memory measurement). Nothing below may modify them, so the
	// condition is read directly (StatusConditions() sets missing ones).
	var claims karpv1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	resources := corev1.ResourceList{}
	var nodes int64
	for i := range claims.Items {
		nc := &claims.Items[i]
		// Only launched NodeClaims are nodes (or instances on their
		// way); a claim whose launch failed or has not been tried is not.
		if !launched(nc) {
			continue
		}
		nodes++
		for name, q := range nc.Status.Capacity {
			sum := resources[name]
			sum.Add(q)
			resources[name] = sum
		}
	}
	resources[corev1.ResourceName("nodes")] = *resource.NewQuantity(nodes, resource.DecimalSI)
	np.Status.Resources = resources
	np.Status.Nodes = &nodes

	conds := np.StatusConditions()
	conds.SetTrue(karpv1.ConditionTypeValidationSucceeded)
	ref := np.Spec.Template.Spec.NodeClassRef
	var class ec2v1.EC2NodeClass
	if reason, msg := nodeClassRefProblem(ref); reason != "" {
		conds.SetFalse(karpv1.ConditionTypeNodeClassReady, reason, msg)
	} else if err := c.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, &class); err != nil {
		conds.SetFalse(karpv1.ConditionTypeNodeClassReady, "NodeClassNotFound",
			"EC2NodeClass "+ref.Name+" not found: create it or fix spec.template.spec.nodeClassRef.name")
	} else {
		setNodeClassReady(np, &class)
		np.Status.NodeClassObservedGeneration = class.Generation
		key := launchhealth.Key{NodePool: np.Name, NodeClass: class.Name}
		gens := launchhealth.Generations{NodePool: np.Generation, NodeClass: class.Generation}
		if unhealthy, st := c.health.Unhealthy(key, gens); unhealthy {
			conds.SetFalse(karpv1.ConditionTypeNodeRegistrationHealthy, "LaunchesFailing",
				st.String()+"; provisioning paused until "+st.PausedUntil.UTC().Format(time.RFC3339)+" or until the NodePool or EC2NodeClass changes. Fix: "+launchhealth.FixFor(st.Cause, class.Name))
		} else {
			conds.SetTrue(karpv1.ConditionTypeNodeRegistrationHealthy)
		}
	}
	if now := conds.Get(karpv1.ConditionTypeNodeClassReady); now.IsFalse() && c.recorder != nil {
		if was := stored.StatusConditions().Get(karpv1.ConditionTypeNodeClassReady); was == nil || !was.IsFalse() || was.Message != now.Message {
			c.recorder.Event(np, corev1.EventTypeWarning, "NodeClassNotReady", now.Message+"; the NodePool is not provisioned from until it is Ready")
		}
	}
	if !equality.Semantic.DeepEqual(stored.Status, np.Status) {
		if err := c.kube.Status().Patch(ctx, np, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return reconcile.Result{RequeueAfter: ResyncPeriod}, nil
}

// nodeClassRefProblem returns the NodeClassReady reason and message for a
// nodeClassRef that cannot name an EC2NodeClass (unset, no name, another
// group or kind), or "" when ref is usable.
func nodeClassRefProblem(ref *karpv1.NodeClassReference) (reason, message string) {
	switch {
	case ref == nil || ref.Name == "":
		return "NodeClassRefMissing", "spec.template.spec.nodeClassRef is not set: set group karpenter.k8s.aws, kind EC2NodeClass and the name of an EC2NodeClass"
	case ref.Group != ec2v1.Group || ref.Kind != "EC2NodeClass":
		return "UnsupportedNodeClass", "spec.template.spec.nodeClassRef must name a karpenter.k8s.aws EC2NodeClass"
	}
	return "", ""
}

// setNodeClassReady mirrors the EC2NodeClass's Ready condition into the
// NodePool's NodeClassReady: True when the class is Ready, False (reason
// NodeClassNotReady, with the class's message) when it is not, Unknown
// while the class has not been resolved yet.
func setNodeClassReady(np *karpv1.NodePool, class *ec2v1.EC2NodeClass) {
	conds := np.StatusConditions()
	ready := meta.FindStatusCondition(class.Status.Conditions, ec2v1.ConditionTypeReady)
	switch {
	case ready == nil || ready.Status == metav1.ConditionUnknown:
		conds.SetUnknownWithReason(karpv1.ConditionTypeNodeClassReady, "AwaitingReconciliation",
			"EC2NodeClass "+class.Name+" has not been resolved yet")
	case ready.Status == metav1.ConditionFalse:
		conds.SetFalse(karpv1.ConditionTypeNodeClassReady, "NodeClassNotReady", "EC2NodeClass "+class.Name+" is not ready: "+ready.Message)
	default:
		conds.SetTrue(karpv1.ConditionTypeNodeClassReady)
	}
}
