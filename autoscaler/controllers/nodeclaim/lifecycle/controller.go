package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
	"github.com/karpx/karpx/autoscaler/state/launchlatency"
	"github.com/karpx/karpx/autoscaler/state/timeouts"
)

// MaxConcurrentReconciles is how many NodeClaims the controller works on at
// once. Cloud calls are bounded by the EC2 API budget below, not by this.
const MaxConcurrentReconciles = 256

// cacheLagLimit bounds how long a reconcile trusts the controller's own
// record of a phase it wrote (Controller.written) over an informer cache
// that does not show it yet. The watch event of the write normally wakes
// the NodeClaim within milliseconds, seconds on an API server under load;
// past the limit the cache is believed again, so a status that someone
// else rolled back is recorded again rather than never.
const cacheLagLimit = 10 * time.Second

// Options configure the lifecycle controller.
type Options struct {
	// RegistrationTTL is how long a launched NodeClaim may wait for its
	// Node. Default 15m, Karpenter's registration TTL.
	RegistrationTTL time.Duration
	// LaunchTTL is how long a NodeClaim may stay without an instance
	// (launch failing and backing off) before it is deleted, so the
	// provisioner plans its pods again. Default 5m.
	LaunchTTL time.Duration
	// NodeNotReadyThreshold is how long an initialised Node may be NotReady
	// before its NodeClaim reports it (condition NodeNotReady=True, event
	// NodeNotReady). The report replaces nothing: node repair (package
	// node/health, behind the NodeRepair gate) does. Default 30m,
	// Karpenter's node repair toleration for Ready.
	NodeNotReadyThreshold time.Duration
	// LaunchBackoffBase is the first wait after a persistent launch error;
	// it doubles per consecutive failure up to LaunchBackoffMax.
	// Defaults 30s and 10m.
	LaunchBackoffBase, LaunchBackoffMax time.Duration
	// Latency, when set, is told when a NodeClaim's CreateFleet is issued
	// (the context of its launch carries it; package launchlatency).
	Latency *launchlatency.Tracker
	// Clock tells the time of the TTLs, backoffs and NotReady threshold.
	// Default clock.RealClock{}; tests pass a k8s.io/utils/clock/testing
	// fake.
	Clock clock.PassiveClock
}

// Controller reconciles NodeClaims through their lifecycle.
type Controller struct {
	kube client.Client
	// reader reads from the API server, past the cache: kube until
	// Register sets the manager's API reader.
	reader   client.Reader
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	health   *launchhealth.Tracker
	opts     Options

	mu       sync.Mutex
	failures map[types.UID]launchFailures
	// launched remembers instances created for NodeClaims whose Launched
	// condition the informer cache may not show yet: a reconcile that
	// reads a stale NodeClaim must not launch a second instance.
	launched map[types.UID]*karpv1.NodeClaim
	// written remembers the furthest phase this controller recorded on
	// each NodeClaim, and when, until the informer cache shows it: a
	// reconcile woken (by a Node event) before the cache caught up with
	// that write must neither write the phase again from its stale copy
	// (a merge patch from it would replace the newer conditions list) nor
	// count the Node again in karpenter_nodes_created_total.
	written map[types.UID]writtenPhase
}

// phase is how far a NodeClaim's status has come: its Launched, Registered
// and Initialized conditions, in that order.
type phase int

const (
	phaseNone phase = iota
	phaseLaunched
	phaseRegistered
	phaseInitialized
)

// writtenPhase is a phase this controller wrote and when (Options.Clock).
type writtenPhase struct {
	phase phase
	at    time.Time
}

// recordedPhase returns the furthest phase nc's status shows.
func recordedPhase(nc *karpv1.NodeClaim) phase {
	switch conds := nc.StatusConditions(); {
	case conds.Get(karpv1.ConditionTypeInitialized).IsTrue():
		return phaseInitialized
	case conds.Get(karpv1.ConditionTypeRegistered).IsTrue():
		return phaseRegistered
	case conds.Get(karpv1.ConditionTypeLaunched).IsTrue():
		return phaseLaunched
	}
	return phaseNone
}

// wrote records that nc's status now shows p, as written by this
// controller.
func (c *Controller) wrote(nc *karpv1.NodeClaim, p phase) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[nc.UID] = writtenPhase{phase: p, at: c.opts.Clock.Now()}
}

// cacheLags reports whether nc, as read from the cache, is older than a
// phase this controller wrote less than cacheLagLimit ago, and how long
// until that limit. Once the cache shows the phase, or the limit has
// passed, the record is dropped.
func (c *Controller) cacheLags(nc *karpv1.NodeClaim) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.written[nc.UID]
	if !ok {
		return 0, false
	}
	left := cacheLagLimit - c.opts.Clock.Now().Sub(w.at)
	if recordedPhase(nc) >= w.phase || left <= 0 {
		delete(c.written, nc.UID)
		return 0, false
	}
	return left, true
}

// patchStatus writes nc's status as a JSON merge patch from stored, the
// copy it was read as, and writes nothing when the status did not change:
// a reconcile woken by every Node update would otherwise send an empty
// PATCH each time. It returns the API server's error.
func (c *Controller) patchStatus(ctx context.Context, nc, stored *karpv1.NodeClaim, opts ...client.MergeFromOption) error {
	if equality.Semantic.DeepEqual(stored.Status, nc.Status) {
		return nil
	}
	return c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, opts...))
}

// New returns a lifecycle Controller with defaults filled in. health
// receives every persistent launch failure, registration timeout and
// registration, keyed by (NodePool, EC2NodeClass).
func New(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, health *launchhealth.Tracker, opts Options) *Controller {
	timeouts.Default(&opts.RegistrationTTL, timeouts.RegistrationTTL)
	timeouts.Default(&opts.LaunchTTL, timeouts.LaunchTTL)
	timeouts.Default(&opts.NodeNotReadyThreshold, 30*time.Minute)
	timeouts.Default(&opts.LaunchBackoffBase, 30*time.Second)
	timeouts.Default(&opts.LaunchBackoffMax, 10*time.Minute)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{kube: kube, reader: kube, cloud: cloud, recorder: recorder, health: health, opts: opts, failures: map[types.UID]launchFailures{}, launched: map[types.UID]*karpv1.NodeClaim{}, written: map[types.UID]writtenPhase{}}
}

// Register adds the controller to mgr: it reconciles NodeClaims and is woken
// by changes to the Node with the same providerID.
func (c *Controller) Register(mgr manager.Manager) error {
	c.reader = mgr.GetAPIReader()
	return builder.ControllerManagedBy(mgr).Named("nodeclaim.lifecycle").
		// Many NodeClaims launch and terminate at once after a scale-up
		// or scale-down; their concurrent cloud calls are what the EC2
		// batcher merges (one CreateFleet for a wave of identical
		// launches). Karpenter's lifecycle controller uses 1000.
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles}).
		For(&karpv1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.nodeToNodeClaim)).
		Complete(c)
}

func (c *Controller) nodeToNodeClaim(ctx context.Context, o client.Object) []reconcile.Request {
	node := o.(*corev1.Node)
	if node.Spec.ProviderID == "" {
		return nil
	}
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.MatchingFields{clusterstate.NodeClaimProviderIDField: node.Spec.ProviderID}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return out
}

// Reconcile advances one NodeClaim by as many phases as the world allows.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey])
	// Launching, registering and terminating NodeClaims come first in the
	// EC2 API budget: they wait for tokens instead of failing fast.
	ctx = cloudprovider.WithPriority(logr.NewContext(ctx, log), cloudprovider.PriorityCritical)

	if !nc.DeletionTimestamp.IsZero() {
		return c.finalize(ctx, nc)
	}
	// NodeClaims karpx plans carry the finalizer from their creation
	// (scheduling.NodeClaimPlan.NodeClaim); one created elsewhere (by hand,
	// by another tool) gets it here.
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		stored := nc.DeepCopy()
		controllerutil.AddFinalizer(nc, karpv1.TerminationFinalizer)
		if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if left, lags := c.cacheLags(nc); lags {
		// This controller already recorded a later phase; the watch event
		// of that write wakes the NodeClaim again once the cache has it.
		log.V(1).Info("cache does not show the phase written yet; waiting for it", "within", left.String())
		return reconcile.Result{RequeueAfter: left}, nil
	}
	if !nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		// Status writes and Node events wake the reconciler too; only the
		// backoff decides when a failed launch is tried again.
		c.mu.Lock()
		f, launched := c.failures[nc.UID], c.launched[nc.UID]
		c.mu.Unlock()
		if launched != nil {
			// The instance exists; only recording it failed. Neither the
			// backoff nor a pause of the pair may delay that.
			return c.launch(ctx, nc)
		}
		if age := c.opts.Clock.Now().Sub(nc.CreationTimestamp.Time); age >= c.opts.LaunchTTL {
			log.Info("no instance launched in time; deleting NodeClaim so its pods are planned again", "launchTTL", c.opts.LaunchTTL.String())
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "LaunchTimeout", "no instance launched within %s; deleting the NodeClaim so its pods are planned again", c.opts.LaunchTTL)
			if err := c.kube.Delete(ctx, nc); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			karpentermetrics.NodeClaimDisrupted(nc, karpentermetrics.ReasonLaunchTimeout)
			return reconcile.Result{}, nil
		}
		if wait := f.next.Sub(c.opts.Clock.Now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		if key, gens, ok := c.healthKey(ctx, nc); ok {
			if paused, st := c.health.Paused(key, gens); paused {
				return reconcile.Result{RequeueAfter: st.PausedUntil.Sub(c.opts.Clock.Now())}, nil
			}
		}
		return c.launch(ctx, nc)
	}
	c.mu.Lock()
	delete(c.launched, nc.UID) // the cache shows the launch now
	c.mu.Unlock()
	if !nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		return c.register(ctx, nc)
	}
	// A registered NodeClaim whose Node is gone was deleted around the
	// termination finalizer (or by a force delete): its instance must not
	// keep running unseen while pods are provisioned for elsewhere.
	node, err := c.nodeFor(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		log.Info("Node is gone; deleting NodeClaim and terminating its instance", "Node", nc.Status.NodeName)
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "NodeDeleted", "Node %s was deleted; terminating the instance", nc.Status.NodeName)
		return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
	}
	if !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		return c.initialize(ctx, nc, node)
	}
	return c.watchReady(ctx, nc, node)
}

// finalize releases a deleted NodeClaim once nothing of it is left: its
// Node is deleted through package termination's drain (the finalizer is
// added first if the Node lacks it, so no pod leaves without eviction) and
// awaited; that path terminates the instance and records
// InstanceTerminating=True. finalize terminates the instance itself only
// when the condition is not True (a NodeClaim that never had a Node, or
// whose Node was removed around the drain), records the condition, and
// releases the NodeClaim once the cloud reports the instance
// shutting-down, terminated or gone. A cloud error keeps the finalizer and
// retries: the NodeClaim is never released while its instance may run.
func (c *Controller) finalize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	c.mu.Lock()
	if l := c.launched[nc.UID]; l != nil && nc.Status.ProviderID == "" {
		// Launched, but the cache does not show it yet.
		nc.Status.ProviderID = l.Status.ProviderID
	}
	c.mu.Unlock()
	if nc.Status.ProviderID != "" {
		node, err := c.nodeFor(ctx, nc)
		if err != nil {
			return reconcile.Result{}, err
		}
		if node != nil {
			if node.DeletionTimestamp.IsZero() {
				if !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
					stored := node.DeepCopy()
					controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
					if err := c.kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
						return reconcile.Result{}, client.IgnoreNotFound(err)
					}
				}
				if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, fmt.Errorf("deleting Node %s: %w", node.Name, err)
				}
				log.Info("NodeClaim deleted; draining its Node", "Node", node.Name)
			}
			// The Node watch wakes us when the drain releases it.
			return reconcile.Result{RequeueAfter: clusterstate.DrainRequeue}, nil
		}
		terminating, err := c.instanceTerminating(ctx, nc)
		if err != nil || terminating == nil {
			return reconcile.Result{}, err
		}
		nc = terminating
		if !nc.StatusConditions().Get(karpv1.ConditionTypeInstanceTerminating).IsTrue() {
			// Keep the finalizer until the cloud confirms the
			// termination, so no instance outlives its NodeClaim.
			if err := cloudprovider.TerminateInstance(ctx, c.cloud, nc, nc.Status.ProviderID); err != nil {
				return reconcile.Result{}, err
			}
			stored := nc.DeepCopy()
			nc.StatusConditions().SetTrue(karpv1.ConditionTypeInstanceTerminating)
			if err := c.patchStatus(ctx, nc, stored, client.MergeFromWithOptimisticLock{}); err != nil {
				if apierrors.IsConflict(err) {
					// A stale copy: the next read asks the cloud again,
					// which answers shutting-down without a terminate.
					return reconcile.Result{RequeueAfter: clusterstate.ConflictRequeue}, nil
				}
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			log.Info("terminated", "providerID", nc.Status.ProviderID)
		}
	}
	stored := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	c.mu.Lock()
	delete(c.failures, nc.UID)
	delete(c.launched, nc.UID)
	delete(c.written, nc.UID)
	c.mu.Unlock()
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	karpentermetrics.NodeClaimTerminated(nc)
	return reconcile.Result{}, nil
}

// instanceTerminating returns nc, or a fresher copy of it, for finalize
// to tell whether the Node's termination (package termination) already
// terminated the instance: that path records InstanceTerminating=True on
// the NodeClaim before it releases the Node, but the informer cache may show
// the Node gone before it shows the condition. So a NodeClaim that had a
// Node (Registered) and lacks the condition is read again from the API
// server (one GET) before its instance is terminated a second time; one that
// never had a Node is terminated without a read. It returns nil, nil when
// the NodeClaim is gone.
func (c *Controller) instanceTerminating(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if nc.StatusConditions().Get(karpv1.ConditionTypeInstanceTerminating).IsTrue() ||
		!nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		return nc, nil
	}
	fresh := &karpv1.NodeClaim{}
	if err := c.reader.Get(ctx, client.ObjectKeyFromObject(nc), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading NodeClaim %s: %w", nc.Name, err)
	}
	return fresh, nil
}

func (c *Controller) nodeFor(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	if nc.Status.ProviderID == "" {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes, client.MatchingFields{clusterstate.NodeProviderIDField: nc.Status.ProviderID}); err != nil {
		return nil, fmt.Errorf("listing Nodes with providerID %s: %w", nc.Status.ProviderID, err)
	}
	switch len(nodes.Items) {
	case 0:
		return nil, nil
	case 1:
		return &nodes.Items[0], nil
	default:
		return nil, fmt.Errorf("%d Nodes share providerID %s; delete the stale ones", len(nodes.Items), nc.Status.ProviderID)
	}
}
