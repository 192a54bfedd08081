package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ec2v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/clusterstate"
	"github.com/karpx/karpx/autoscaler/controllers/termination"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/launchhealth"
	"github.com/karpx/karpx/autoscaler/launchlatency"
	"github.com/karpx/karpx/autoscaler/providers/budget"
)

// Index names registered by IndexFields.
const (
	// NodeProviderIDField indexes Nodes by spec.providerID.
	NodeProviderIDField = "spec.providerID"
	// NodeClaimProviderIDField indexes NodeClaims by status.providerID.
	NodeClaimProviderIDField = "status.providerID"
)

// MaxConcurrentReconciles is how many NodeClaims the controller works on at
// once. Cloud calls are bounded by the EC2 API budget below, not by this.
const MaxConcurrentReconciles = 256

// conflictRequeue is how soon a NodeClaim whose Node patch lost an
// optimistic-lock conflict is reconciled again (from a fresh read): about
// the first steps of controller-runtime's default per-item backoff (5 ms
// doubling), without its deprecated Result.Requeue.
const conflictRequeue = 100 * time.Millisecond

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
	// NodeNotReady). The node is never replaced for it: node repair is out
	// of scope. Default 30m, Karpenter's node repair toleration for Ready.
	NodeNotReadyThreshold time.Duration
	// LaunchBackoffBase is the first wait after a persistent launch error;
	// it doubles per consecutive failure up to LaunchBackoffMax.
	// Defaults 30s and 10m.
	LaunchBackoffBase, LaunchBackoffMax time.Duration
	// Latency, when set, is told when a NodeClaim's CreateFleet is issued
	// (the context of its launch carries it; package launchlatency).
	Latency *launchlatency.Tracker
}

// Controller reconciles NodeClaims through their lifecycle.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	health   *launchhealth.Tracker
	opts     Options
	now      func() time.Time

	mu       sync.Mutex
	failures map[types.UID]launchFailures
	// launched remembers instances created for NodeClaims whose Launched
	// condition the informer cache may not show yet: a reconcile that
	// reads a stale NodeClaim must not launch a second instance.
	launched map[types.UID]*karpv1.NodeClaim
}

// launchFailures counts consecutive persistent launch failures of one
// NodeClaim and when the next attempt is due. Kept in memory: after a
// restart a NodeClaim gets one immediate attempt, then backs off again.
type launchFailures struct {
	count int
	next  time.Time
}

// New returns a lifecycle Controller with defaults filled in. health
// receives every persistent launch failure, registration timeout and
// registration, keyed by (NodePool, EC2NodeClass).
func New(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, health *launchhealth.Tracker, opts Options) *Controller {
	if opts.RegistrationTTL <= 0 {
		opts.RegistrationTTL = 15 * time.Minute
	}
	if opts.LaunchTTL <= 0 {
		opts.LaunchTTL = 5 * time.Minute
	}
	if opts.NodeNotReadyThreshold <= 0 {
		opts.NodeNotReadyThreshold = 30 * time.Minute
	}
	if opts.LaunchBackoffBase <= 0 {
		opts.LaunchBackoffBase = 30 * time.Second
	}
	if opts.LaunchBackoffMax <= 0 {
		opts.LaunchBackoffMax = 10 * time.Minute
	}
	return &Controller{kube: kube, cloud: cloud, recorder: recorder, health: health, opts: opts, now: time.Now, failures: map[types.UID]launchFailures{}, launched: map[types.UID]*karpv1.NodeClaim{}}
}

// IndexFields registers the providerID indexes on Nodes and NodeClaims.
func IndexFields(ctx context.Context, mgr manager.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Node{}, NodeProviderIDField, func(o client.Object) []string {
		if id := o.(*corev1.Node).Spec.ProviderID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &karpv1.NodeClaim{}, NodeClaimProviderIDField, func(o client.Object) []string {
		if id := o.(*karpv1.NodeClaim).Status.ProviderID; id != "" {
			return []string{id}
		}
		return nil
	})
}

// Register adds the controller to mgr: it reconciles NodeClaims and is woken
// by changes to the Node with the same providerID.
func (c *Controller) Register(mgr manager.Manager) error {
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
	if err := c.kube.List(ctx, &list, client.MatchingFields{NodeClaimProviderIDField: node.Spec.ProviderID}); err != nil {
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
	ctx = budget.WithPriority(logr.NewContext(ctx, log), budget.Critical)

	if !nc.DeletionTimestamp.IsZero() {
		return c.finalize(ctx, nc)
	}
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		stored := nc.DeepCopy()
		controllerutil.AddFinalizer(nc, karpv1.TerminationFinalizer)
		if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
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
		if age := c.now().Sub(nc.CreationTimestamp.Time); age >= c.opts.LaunchTTL {
			log.Info("no instance launched in time; deleting NodeClaim so its pods are planned again", "launchTTL", c.opts.LaunchTTL.String())
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "LaunchTimeout", "no instance launched within %s; deleting the NodeClaim so its pods are planned again", c.opts.LaunchTTL)
			return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
		}
		if wait := f.next.Sub(c.now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		if key, gens, ok := c.healthKey(ctx, nc); ok {
			if paused, st := c.health.Paused(key, gens); paused {
				return reconcile.Result{RequeueAfter: st.PausedUntil.Sub(c.now())}, nil
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
		return c.initialize(ctx, nc)
	}
	return c.watchReady(ctx, nc, node)
}

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
	case c.now().Sub(since) < c.opts.NodeNotReadyThreshold:
		return reconcile.Result{RequeueAfter: c.opts.NodeNotReadyThreshold - c.now().Sub(since)}, nil
	case reported:
		return reconcile.Result{}, nil
	default:
		msg := fmt.Sprintf("Node %s NotReady since %s (longer than %s); not replaced: check kubelet on the instance %s, or delete the NodeClaim to replace it",
			node.Name, since.UTC().Format(time.RFC3339), c.opts.NodeNotReadyThreshold, nc.Status.ProviderID)
		nc.StatusConditions().SetTrueWithReason(ConditionTypeNodeNotReady, "NotReadyTooLong", msg)
		logr.FromContextOrDiscard(ctx).Info("Node NotReady too long; reported, not replaced", "Node", node.Name, "since", since.UTC().Format(time.RFC3339))
		c.recorder.Event(nc, corev1.EventTypeWarning, "NodeNotReady", msg)
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)))
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
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
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
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, fmt.Errorf("recording launch of %s: %w", launched.Status.ProviderID, err)
	}
	log.Info("launched", "providerID", nc.Status.ProviderID,
		"instanceType", nc.Labels[corev1.LabelInstanceTypeStable], "zone", nc.Labels[corev1.LabelTopologyZone],
		"capacityType", nc.Labels[karpv1.CapacityTypeLabelKey])
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "Launched", "launched %s (%s, %s)", nc.Status.ProviderID,
		nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[karpv1.CapacityTypeLabelKey])
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
		karpentermetrics.NodeClaimDisrupted(nc, "InsufficientCapacity")
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
		f.next = c.now().Add(wait)
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
		if perr := c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); perr != nil {
			return reconcile.Result{}, client.IgnoreNotFound(perr)
		}
		return reconcile.Result{RequeueAfter: wait}, nil
	default:
		return reconcile.Result{}, fmt.Errorf("launching: %w", err)
	}
}

func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	node, err := c.nodeFor(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		launched := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched)
		waited := c.now().Sub(launched.LastTransitionTime.Time)
		if waited >= c.opts.RegistrationTTL {
			log.Info("node did not register in time; deleting NodeClaim and terminating its instance",
				"providerID", nc.Status.ProviderID, "registrationTTL", c.opts.RegistrationTTL.String())
			msg := fmt.Sprintf("no Node with providerID %s registered within %s; terminating the instance (check the EC2NodeClass userData and the node's bootstrap logs)",
				nc.Status.ProviderID, c.opts.RegistrationTTL)
			c.recorder.Event(nc, corev1.EventTypeWarning, "RegistrationTimeout", msg)
			c.recordFailure(ctx, nc, "RegistrationTimeout", msg)
			return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
		}
		return reconcile.Result{RequeueAfter: c.opts.RegistrationTTL - waited}, nil
	}

	stored := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		node.Labels[k] = v
	}
	firstRegistration := node.Labels[karpv1.NodeRegisteredLabelKey] != "true"
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	// From now on the Node leaves only through package termination's
	// drain, whoever deletes it.
	controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
	node.Spec.Taints = withoutTaint(node.Spec.Taints, karpv1.UnregisteredTaintKey)
	// startupTaints too, once, as kubelet's --register-with-taints does:
	// the karpenter.sh/registered label written in the same patch keeps a
	// retried registration from putting back a taint its agent removed.
	taints := append([]corev1.Taint{}, nc.Spec.Taints...)
	if firstRegistration {
		taints = append(taints, nc.Spec.StartupTaints...)
	}
	for _, t := range taints {
		if !hasTaint(node.Spec.Taints, t) {
			node.Spec.Taints = append(node.Spec.Taints, t)
		}
	}
	if err := controllerutil.SetOwnerReference(nc, node, c.kube.Scheme()); err != nil {
		return reconcile.Result{}, err
	}
	if err := c.kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// Another writer (kwok or kubelet, the termination
			// controller) changed the Node since it was read: try again
			// soon from a fresh read.
			return reconcile.Result{RequeueAfter: conflictRequeue}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}

	storedNC := nc.DeepCopy()
	nc.Status.NodeName = node.Name
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
	nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeInitialized, "AwaitingReady", "waiting for the Node to be Ready without startup taints")
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(storedNC)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log.Info("registered", "Node", node.Name)
	if key, _, ok := c.healthKey(ctx, nc); ok {
		c.health.Success(key)
	}
	return c.initialize(ctx, nc)
}

func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	node, err := c.nodeFor(ctx, nc)
	if err != nil || node == nil {
		return reconcile.Result{}, err
	}
	if reason := notInitialized(nc, node); reason != "" {
		stored := nc.DeepCopy()
		nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeInitialized, "NotInitialized", reason)
		if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		return reconcile.Result{}, nil // the Node watch wakes us
	}
	stored := node.DeepCopy()
	node.Labels[karpv1.NodeInitializedLabelKey] = "true"
	if err := c.kube.Patch(ctx, node, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	storedNC := nc.DeepCopy()
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(storedNC)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	logr.FromContextOrDiscard(ctx).Info("initialized", "Node", node.Name)
	return reconcile.Result{}, nil
}

// notInitialized returns why node is not initialised yet, or "".
func notInitialized(nc *karpv1.NodeClaim, node *corev1.Node) string {
	if b := clusterstate.InitializationBlockers(nc, node); len(b) > 0 {
		return b[0]
	}
	return ""
}

// finalize releases a deleted NodeClaim once nothing of it is left: its
// Node is deleted through package termination's drain (the finalizer is
// added first if the Node lacks it, so no pod leaves without eviction), then
// the instance is terminated and the NodeClaim released once EC2 reports it
// shutting-down or terminated. A cloud error keeps the finalizer and
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
			return reconcile.Result{RequeueAfter: termination.DrainRequeue}, nil
		}
		gone, err := termination.TerminateInstance(ctx, c.cloud, nc, nc.Status.ProviderID)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !gone {
			// Keep the finalizer until EC2 reports the instance
			// shutting-down, so no instance outlives its NodeClaim.
			return reconcile.Result{RequeueAfter: termination.DrainRequeue}, nil
		}
		log.Info("terminated", "providerID", nc.Status.ProviderID)
	}
	stored := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	c.mu.Lock()
	delete(c.failures, nc.UID)
	delete(c.launched, nc.UID)
	c.mu.Unlock()
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	karpentermetrics.NodeClaimTerminated(nc)
	return reconcile.Result{}, nil
}

func (c *Controller) nodeFor(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	if nc.Status.ProviderID == "" {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes, client.MatchingFields{NodeProviderIDField: nc.Status.ProviderID}); err != nil {
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}

func withoutTaint(taints []corev1.Taint, key string) []corev1.Taint {
	out := taints[:0:0]
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
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
