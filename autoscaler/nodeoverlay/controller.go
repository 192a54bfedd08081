package nodeoverlay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/awslabs/operatorpkg/status"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// ConditionTypeValidationSucceeded is the NodeOverlay condition the
// controller writes (sigs.k8s.io/karpenter v1.14.0
// pkg/apis/v1alpha1/nodeoverlay_status.go); Ready follows it.
const ConditionTypeValidationSucceeded = v1alpha1.ConditionTypeValidationSucceeded

// ResyncPeriod is how often the overlays are evaluated again without an
// event: Karpenter's six hours (pkg/controllers/nodeoverlay
// controller.go@v1.14.0). Apply matches fresh instance types on every
// call, so the period only bounds how late a conflict that new offerings
// create is reported.
const ResyncPeriod = 6 * time.Hour

// Controller evaluates every NodeOverlay against every NodePool's
// instance types, writes each overlay's ValidationSucceeded condition and
// updates the Store the scheduler's instance types come through. One
// reconcile covers all overlays; NodeOverlay, NodePool and node class
// events all queue the same request.
type Controller struct {
	kube  client.Client
	cloud cloudprovider.CloudProvider
	store *Store
	clock clock.Clock
	log   logr.Logger
	// OnUpdate, when set, is called after each evaluation is stored (the
	// operator triggers a provisioning and a disruption pass with it).
	OnUpdate func()
}

// NewController returns the controller. cloud must be the cloud provider
// without the overlay decorator (the overlays are evaluated against the
// cloud's own instance types).
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, store *Store, clk clock.Clock, log logr.Logger) *Controller {
	return &Controller{kube: kube, cloud: cloud, store: store, clock: clk, log: log}
}

// ControllerName is the controller's name, as Karpenter's
// (pkg/controllers/nodeoverlay/controller.go@v1.14.0 Name).
const ControllerName = "nodeoverlay.controller"

// request is the one request every event maps to.
var request = reconcile.Request{NamespacedName: types.NamespacedName{Name: "nodeoverlays"}}

// Register adds the controller to mgr, watching NodeOverlays and NodePools
// (spec changes) and nodeClasses (every change: their status decides the
// instance types).
func (c *Controller) Register(mgr manager.Manager, nodeClasses ...client.Object) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{request} })
	b := builder.ControllerManagedBy(mgr).Named(ControllerName).
		Watches(&v1alpha1.NodeOverlay{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&karpv1.NodePool{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	for _, nc := range nodeClasses {
		b = b.Watches(nc, one)
	}
	return b.Complete(c)
}

// Reconcile implements reconcile.Reconciler. It returns the error of a
// list or status write; NodePools whose instance types cannot be read are
// left unevaluated (their provisioning waits) and their errors returned
// so the request is retried with backoff.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var overlays v1alpha1.NodeOverlayList
	if err := c.kube.List(ctx, &overlays); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeOverlays: %w", err)
	}
	var pools karpv1.NodePoolList
	if err := c.kube.List(ctx, &pools); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodePools: %w", err)
	}
	var evaluated []Pool
	var errs []error
	for i := range pools.Items {
		np := &pools.Items[i]
		its, err := c.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			errs = append(errs, fmt.Errorf("instance types of NodePool %q: %w", np.Name, err))
			continue
		}
		evaluated = append(evaluated, Pool{NodePool: np, InstanceTypes: its})
	}
	ev := Evaluate(ctx, overlays.Items, evaluated)
	if err := c.writeStatuses(ctx, overlays.Items, ev); err != nil {
		// An overlay changed or went away while evaluating: evaluate
		// again soon, with the current ones (Karpenter requeues too).
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{}, err
	}
	c.store.Update(ev)
	if c.OnUpdate != nil {
		c.OnUpdate()
	}
	c.log.V(1).Info("evaluated NodeOverlays", "applied", ev.Names(), "overlays", len(overlays.Items), "nodePools", len(evaluated))
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: ResyncPeriod}, nil
}

// writeStatuses sets each overlay's ValidationSucceeded condition from
// its verdict and patches the status of those that changed, with an
// optimistic lock (the conditions are a list a merge patch replaces).
func (c *Controller) writeStatuses(ctx context.Context, overlays []v1alpha1.NodeOverlay, ev *Evaluation) error {
	var errs []error
	for i := range overlays {
		o := &overlays[i]
		before := o.DeepCopy()
		conds := o.StatusConditions(status.WithClock(c.clock))
		if v := ev.Verdicts[o.Name]; v.Reason != "" {
			conds.SetFalse(ConditionTypeValidationSucceeded, v.Reason, v.Message)
		} else {
			conds.SetTrue(ConditionTypeValidationSucceeded)
		}
		if equality.Semantic.DeepEqual(before, o) {
			continue
		}
		if err := c.kube.Status().Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return err
			}
			errs = append(errs, fmt.Errorf("NodeOverlay %q status: %w", o.Name, err))
		}
	}
	return errors.Join(errs...)
}
