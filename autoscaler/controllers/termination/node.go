package termination

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/golang-lru/v2/expirable"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// NodeController drains and terminates Nodes that are being deleted and
// carry the karpenter.sh/termination finalizer.
type NodeController struct {
	kube     client.Client
	reader   client.Reader
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	drainer  *Drainer
	clock    clock.PassiveClock
	// written is this controller's last status write of each NodeClaim
	// it terminates, by ownWriteKey (see ownWrite).
	written *expirable.LRU[string, ownWrite]
}

// ownWrite is a status write of a NodeClaim by this controller: the
// resourceVersion it was made from and the NodeClaim the API server
// returned. A reconcile that follows it within a moment (the drain's last
// pod gone) may read the cache's copy from before it; that copy still has
// resourceVersion from, and the write would conflict (409) and cost a
// fresh read and a second write. newest uses after in its place.
type ownWrite struct {
	from  string
	after *karpv1.NodeClaim
}

// ownWriteTTL bounds how long an ownWrite is kept: far longer than the
// cache takes to show a write (milliseconds to a second on a busy API
// server), so an entry is dropped when the cache shows the write or the
// Node is released, or at the latest after this.
const ownWriteTTL = time.Minute

// ownWriteLimit bounds the number of ownWrites kept (one per NodeClaim
// being terminated at once; 64 reconcile at a time).
const ownWriteLimit = 4096

// NewNodeController returns a NodeController. kube must be a cached client
// whose cache indexes pods by clusterstate.PodNodeNameField and NodeClaims by
// clusterstate.NodeClaimProviderIDField; reader is an uncached one
// (mgr.GetAPIReader()), which reads a NodeClaim afresh when the cache's copy
// was stale (see writeConditions).
func NewNodeController(kube client.Client, reader client.Reader, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.PassiveClock) *NodeController {
	return &NodeController{kube: kube, reader: reader, cloud: cloud, recorder: recorder, clock: clk, drainer: NewDrainer(kube, recorder, clk),
		written: expirable.NewLRU[string, ownWrite](ownWriteLimit, nil, ownWriteTTL)}
}

// newest returns nc, the cache's copy, or, when that copy is the one this
// controller's last write of it was made from (the cache does not show
// the write yet), a copy of what that write returned. Equal
// resourceVersions are the same object version; the cache never goes
// back, so any other resourceVersion is the write or a later one, and the
// entry is dropped.
func (c *NodeController) newest(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	if nc == nil {
		return nil
	}
	w, ok := c.written.Get(ownWriteKey(nc))
	if !ok {
		return nc
	}
	if nc.ResourceVersion == w.from {
		return w.after.DeepCopy()
	}
	c.written.Remove(ownWriteKey(nc))
	return nc
}

// ownWriteKey is the key of nc's ownWrite: its UID and name.
func ownWriteKey(nc *karpv1.NodeClaim) string {
	return string(nc.UID) + "/" + nc.Name
}

// Register adds the controller to mgr and the VolumeAttachment index
// (VolumeAttachmentNodeNameField) to its cache. It reconciles Nodes being
// deleted and is woken when a pod on such a Node goes away or one of its
// VolumeAttachments is deleted. It returns the indexer's or the builder's
// error.
func (c *NodeController) Register(mgr manager.Manager) error {
	if err := indexVolumeAttachments(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing VolumeAttachments by node: %w", err)
	}
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
		Watches(&storagev1.VolumeAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := o.(*storagev1.VolumeAttachment).Spec.NodeName; n != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
			}
			return nil
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(c)
}

// Reconcile advances the termination of one Node by as many steps as the
// world allows (see the package documentation). A write that conflicts on
// the Node (its taint or its finalizer, written from the cache's copy,
// while the kubelet or kube-controller-manager has just changed the Node)
// is not an error: the reconcile runs again after
// clusterstate.ConflictRequeue from a fresh read, as Karpenter's
// controllers requeue on a conflict. It returns the other errors of
// reconcile.
func (c *NodeController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		logr.FromContextOrDiscard(ctx).V(1).Info("Node changed since the cache's copy; requeued", "Node", req.Name, "error", err.Error())
		return reconcile.Result{RequeueAfter: clusterstate.ConflictRequeue}, nil
	}
	return res, err
}

// reconcile is Reconcile's work, one pass over the steps.
func (c *NodeController) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
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
	nc = c.newest(nc)
	log := logr.FromContextOrDiscard(ctx).WithValues("Node", node.Name)
	if nc != nil {
		log = log.WithValues("NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey])
	}
	ctx = cloudprovider.WithPriority(logr.NewContext(ctx, log), cloudprovider.PriorityCritical)

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
	if err := clusterstate.SetDisruptedTaint(ctx, c.kube, node, true); err != nil {
		return reconcile.Result{}, err
	}
	deadline, err := c.deadline(ctx, node, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	// 3-5 change the NodeClaim's conditions in memory only; writeConditions
	// writes what changed in one status patch per reconcile, as Karpenter's
	// termination controller does (Reconcile,
	// pkg/controllers/node/termination/controller.go@v1.14.0): an empty
	// Node's Drained, VolumesDetached and InstanceTerminating go in one
	// write, not four.
	var read *karpv1.NodeClaim
	if nc != nil {
		read = nc.DeepCopy()
	}
	wait, stepErr := c.advance(ctx, node, nc, deadline)
	if err := c.writeConditions(ctx, node, read, nc); err != nil {
		return reconcile.Result{}, err
	}
	if stepErr != nil {
		return reconcile.Result{}, stepErr
	}
	if wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	// 6. Release the Node.
	stored := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc != nil {
		c.written.Remove(ownWriteKey(nc))
	}
	karpentermetrics.NodeTerminated(node, stored.DeletionTimestamp.Time, c.clock.Now())
	log.Info("drained and terminated; Node released", "providerID", node.Spec.ProviderID)
	return reconcile.Result{}, nil
}

// advance runs steps 3 to 5 of node's termination as far as they go now:
// 3. drain (bounded by deadline, nil for none), 4. the drained pods'
// VolumeAttachments, 5. the instance's termination, whose cloud
// confirmation InstanceTerminating records, so that the Node is released
// (step 6) only after it. It changes the conditions of nc (nil when the
// Node has no NodeClaim) in memory, for writeConditions. It returns how long
// to wait before the next step (0: all done), or the API server's or the
// cloud's error.
func (c *NodeController) advance(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, deadline *time.Time) (time.Duration, error) {
	if done, err := c.drain(ctx, node, nc, deadline); err != nil || !done {
		return clusterstate.DrainRequeue, err
	}
	if wait, err := c.awaitVolumes(ctx, node, nc, deadline); err != nil || wait {
		if wait {
			logr.FromContextOrDiscard(ctx).V(1).Info("awaiting VolumeAttachments' deletion")
		}
		return clusterstate.DrainRequeue, err
	}
	return 0, c.terminate(ctx, node, nc)
}

// writeConditions writes nc's conditions when they differ from read's
// (nc as read at the start of the reconcile), with an optimistic lock: a
// merge patch replaces the list whole, so a stale copy must not win. Its
// own last write is remembered (ownWrite), so a cache that does not show
// that write yet costs nothing (newest). When the cache's copy was stale
// otherwise (409: another writer wrote since, or this process restarted),
// it reads the NodeClaim from the API server and writes the conditions
// this reconcile changed onto that copy, once: giving up would leave an
// instance just terminated unrecorded, and the next reconcile would ask
// EC2 to terminate it again. It counts the Node as drained
// (karpentermetrics.NodeDrained) once Drained=True is written, not before,
// and only when the copy the write was made from did not have it yet, so
// neither a retried reconcile nor one that read a stale cache counts it
// twice. A nil nc (no NodeClaim) or a NodeClaim already gone needs
// nothing; it returns the API server's other errors.
func (c *NodeController) writeConditions(ctx context.Context, node *corev1.Node, read, nc *karpv1.NodeClaim) error {
	if nc == nil || equality.Semantic.DeepEqual(read.Status.Conditions, nc.Status.Conditions) {
		return nil
	}
	// base is the copy the write that succeeds was made from: whether
	// Drained was already True there says whether this write made it so.
	// wrote is the object that write returned (nil: nothing written).
	base, wrote := read, nc
	err := c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(read, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		fresh := &karpv1.NodeClaim{}
		if err = c.reader.Get(ctx, client.ObjectKeyFromObject(nc), fresh); err == nil {
			base, wrote = fresh.DeepCopy(), nil
			for _, cond := range nc.Status.Conditions {
				if before := read.StatusConditions().Get(cond.Type); before != nil && equality.Semantic.DeepEqual(*before, cond) {
					continue // not changed by this reconcile
				}
				// Set keeps fresh's lastTransitionTime when the write missed
				// already has this status.
				fresh.StatusConditions().Set(cond)
			}
			if !equality.Semantic.DeepEqual(base.Status.Conditions, fresh.Status.Conditions) {
				err, wrote = c.kube.Status().Patch(ctx, fresh, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})), fresh
			}
		}
	}
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("updating the conditions of NodeClaim %s: %w", nc.Name, err)
	}
	if err == nil && wrote != nil {
		c.written.Add(ownWriteKey(nc), ownWrite{from: base.ResourceVersion, after: wrote.DeepCopy()})
	}
	if !base.StatusConditions().IsTrue(karpv1.ConditionTypeDrained) && nc.StatusConditions().IsTrue(karpv1.ConditionTypeDrained) {
		karpentermetrics.NodeDrained(node)
	}
	return nil
}

// drain runs one step of node's drain (Drainer.Drain, bounded by deadline,
// nil for none) and keeps nc's Drained condition as Karpenter's
// termination controller writes it (awaitDrain,
// pkg/controllers/node/termination/controller.go@v1.14.0): Unknown with
// reason Draining while the drain runs, True once it is done (in memory:
// see writeConditions). nc is nil when the Node has no NodeClaim. It
// reports whether the drain is done, and the API server's errors.
func (c *NodeController) drain(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, deadline *time.Time) (bool, error) {
	log := logr.FromContextOrDiscard(ctx)
	if nc != nil && nc.StatusConditions().Get(karpv1.ConditionTypeDrained) == nil {
		nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeDrained, "Draining", "Draining")
	}
	st, err := c.drainer.Drain(ctx, node, deadline)
	karpentermetrics.PodsDrained(nc, st.Evicted)
	if err != nil {
		return false, err
	}
	if !st.Done {
		log.V(1).Info("draining", "evicted", st.Evicted, "deleted", st.Deleted, "blocked", len(st.Blocked), "terminating", st.Waiting,
			"doNotDisrupt", len(st.Protected))
		return false, nil
	}
	if nc != nil {
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeDrained)
	}
	return true, nil
}

// terminate terminates the instance behind node (one Delete: see
// cloudprovider.TerminateInstance) unless nc, the Node's NodeClaim (nil
// when there is none), already has InstanceTerminating=True, and then sets
// that condition on nc in memory (see writeConditions). It returns the
// cloud's error, so the caller retries; a Node without providerID has no
// instance and needs nothing.
func (c *NodeController) terminate(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim) error {
	if node.Spec.ProviderID == "" || (nc != nil && nc.StatusConditions().Get(karpv1.ConditionTypeInstanceTerminating).IsTrue()) {
		return nil
	}
	if err := cloudprovider.TerminateInstance(ctx, c.cloud, nc, node.Spec.ProviderID); err != nil {
		return err
	}
	if nc != nil {
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeInstanceTerminating)
	}
	return nil
}

// deadline is when the remaining pods are deleted rather than evicted: the
// earliest deletion timestamp of the Node and its NodeClaim plus the
// NodeClaim's spec.terminationGracePeriod, or the NodeClaim's
// karpenter.sh/nodeclaim-termination-timestamp when that is earlier (or
// the grace period unset); nil when neither is set. The computed one is
// recorded on the NodeClaim as karpenter.sh/nodeclaim-termination-timestamp,
// as Karpenter does, so users can see it.
func (c *NodeController) deadline(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim) (*time.Time, error) {
	if nc == nil {
		return nil, nil
	}
	// An earlier deadline already recorded stands: node repair
	// (autoscaler/controllers/node/health) records the time it repaired,
	// so that a broken node's pods are deleted at once, as Karpenter's
	// terminator reads the annotation (nodeTerminationTime,
	// pkg/controllers/node/termination/controller.go@v1.14.0).
	recorded, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
	if err == nil && (nc.Spec.TerminationGracePeriod == nil || !recorded.After(c.gracePeriodEnd(node, nc))) {
		return &recorded, nil
	}
	if nc.Spec.TerminationGracePeriod == nil {
		return nil, nil
	}
	d := c.gracePeriodEnd(node, nc)
	stamp := d.UTC().Format(time.RFC3339)
	if nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] != stamp {
		stored := nc.DeepCopy()
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, karpv1.NodeClaimTerminationTimestampAnnotationKey, stamp)
		if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("recording the termination deadline on NodeClaim %s: %w", nc.Name, err)
		}
		// Karpenter's Warning TerminationGracePeriodExpiring, on the Node
		// and the NodeClaim (pkg/controllers/node/termination/terminator/
		// events/events.go@v1.14.0), once, when the deadline is set.
		msg := fmt.Sprintf("All pods will be deleted by %s", stamp)
		c.recorder.Event(node, corev1.EventTypeWarning, "TerminationGracePeriodExpiring", msg)
		c.recorder.Event(nc, corev1.EventTypeWarning, "TerminationGracePeriodExpiring", msg)
	}
	return &d, nil
}

// gracePeriodEnd is the earliest deletion timestamp of node and nc plus
// nc's spec.terminationGracePeriod, which must be set.
func (c *NodeController) gracePeriodEnd(node *corev1.Node, nc *karpv1.NodeClaim) time.Time {
	start := node.DeletionTimestamp.Time
	if !nc.DeletionTimestamp.IsZero() && nc.DeletionTimestamp.Before(node.DeletionTimestamp) {
		start = nc.DeletionTimestamp.Time
	}
	return start.Add(nc.Spec.TerminationGracePeriod.Duration)
}

// nodeClaimFor returns the NodeClaim with node's providerID, or nil.
func (c *NodeController) nodeClaimFor(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.MatchingFields{clusterstate.NodeClaimProviderIDField: node.Spec.ProviderID}); err != nil {
		return nil, fmt.Errorf("listing NodeClaims with providerID %s: %w", node.Spec.ProviderID, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}
