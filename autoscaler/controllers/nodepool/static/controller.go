package static

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/autoscaler/state/pods"
)

// Name is the controller's name. Karpenter runs two, static.provisioning
// and static.deprovisioning; karpx runs both directions in one.
const Name = "nodepool.static"

// Resync is how long a static NodePool waits before it is counted again
// without an event: Karpenter's one minute (RequeueAfter in both static
// controllers, pkg/controllers/static/*/controller.go@v1.14.0).
const Resync = time.Minute

// LimitRequeue is how soon a NodePool whose limits.nodes holds back a
// launch is looked at again: Karpenter's 30 seconds (static provisioning
// controller, same file).
const LimitRequeue = 30 * time.Second

// ReplacementsAnnotationKey marks a NodeClaim that disruption is replacing
// (the names of its replacements). Such a NodeClaim is pending disruption:
// it counts towards spec.replicas for launching, not for scale-in.
// The key is package disruption's ReplacementsAnnotationKey
// (autoscaler/controllers/disruption/candidates.go); controllers import
// no sibling controller, so it is repeated here.
const ReplacementsAnnotationKey = "karpx.io/disruption-replacements"

// Controller keeps static NodePools at spec.replicas (see the package
// documentation). Create it with New.
type Controller struct {
	kube  client.Client
	live  client.Reader
	clock clock.PassiveClock
}

// New returns a Controller. kube is the manager's cached client (NodePools,
// pods by clusterstate.PodNodeNameField, and every write); live reads
// NodeClaims from the API server (the manager's APIReader) so that a count
// never misses a NodeClaim just created. clk nil means the real clock.
func New(kube client.Client, live client.Reader, clk clock.PassiveClock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, live: live, clock: clk}
}

// Register adds the controller to mgr. A NodePool is reconciled when it is
// created, when its spec.replicas or its NodeClassReady condition's status
// changes, and when one of its NodeClaims is created, starts deleting or
// is gone.
func (c *Controller) Register(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(Name).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		For(&karpv1.NodePool{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return nodePoolChanged(e.ObjectOld.(*karpv1.NodePool), e.ObjectNew.(*karpv1.NodePool))
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(nodePoolOf), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
			},
		})).
		Complete(c)
}

// nodePoolChanged reports whether an update of a NodePool from o to n
// calls for a pass: spec.replicas changed, or the status of its
// NodeClassReady condition did (a NodePool whose EC2NodeClass becomes
// ready launches at once, as Karpenter's static provisioning controller
// reconciles a NodePool turning Ready).
func nodePoolChanged(o, n *karpv1.NodePool) bool {
	return !equalReplicas(o.Spec.Replicas, n.Spec.Replicas) || conditionStatus(o, karpv1.ConditionTypeNodeClassReady) != conditionStatus(n, karpv1.ConditionTypeNodeClassReady)
}

// conditionStatus returns the status of np's condition of type t, "" when
// it has none. It reads the conditions without StatusConditions(), which
// may write to np (an informer cache's object).
func conditionStatus(np *karpv1.NodePool, t string) metav1.ConditionStatus {
	for _, c := range np.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// equalReplicas reports whether a and b are both unset or equal.
func equalReplicas(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// nodePoolOf maps a NodeClaim to its NodePool (label karpenter.sh/nodepool).
func nodePoolOf(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[karpv1.NodePoolLabelKey]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
}

// Counts are a static NodePool's NodeClaims by state, as Karpenter's
// NodePoolState counts them (pkg/controllers/state/statenodepool.go@v1.14.0).
type Counts struct {
	// Active are NodeClaims neither being deleted nor being replaced.
	Active int64
	// PendingDisruption are NodeClaims not deleted yet whose replacement
	// disruption is launching (ReplacementsAnnotationKey).
	PendingDisruption int64
	// Deleting are NodeClaims with a deletion timestamp.
	Deleting int64
}

// count sorts the NodePool's NodeClaims into Counts and returns the active
// ones.
func count(claims []karpv1.NodeClaim) (Counts, []*karpv1.NodeClaim) {
	var n Counts
	var active []*karpv1.NodeClaim
	for i := range claims {
		nc := &claims[i]
		switch {
		case !nc.DeletionTimestamp.IsZero():
			n.Deleting++
		case nc.Annotations[ReplacementsAnnotationKey] != "":
			n.PendingDisruption++
		default:
			n.Active++
			active = append(active, nc)
		}
	}
	return n, active
}

// ToLaunch is how many NodeClaims a static NodePool launches with
// replicas desired, counts n and limits.nodes limit (nil: no limit), as
// Karpenter's static provisioning controller and
// NodePoolState.ReserveNodeCount decide (v1.14.0): nothing while active
// plus pending-disruption NodeClaims reach replicas; otherwise replicas
// minus active, at most limit minus every NodeClaim counted (deleting
// ones included), never below zero.
func ToLaunch(replicas int64, n Counts, limit *int64) int64 {
	if n.Active+n.PendingDisruption >= replicas {
		return 0
	}
	want := replicas - n.Active
	room := int64(math.MaxInt64)
	if limit != nil {
		room = *limit - n.Active - n.PendingDisruption - n.Deleting
	}
	return max(0, min(want, room))
}

// nodeLimit returns spec.limits.nodes as a count, or nil when unset.
func nodeLimit(np *karpv1.NodePool) *int64 {
	q, ok := np.Spec.Limits[corev1.ResourceName("nodes")]
	if !ok {
		return nil
	}
	v := q.Value()
	return &v
}

// Reconcile launches or deletes the NodePool's NodeClaims until its active
// count is spec.replicas. It does nothing for a NodePool without
// spec.replicas, being deleted, or whose NodeClassReady condition is
// False (provisioning skips such a NodePool too). It returns the API
// server's errors (the request is retried with backoff).
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if np.Spec.Replicas == nil || !np.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if cond := np.StatusConditions().Get(karpv1.ConditionTypeNodeClassReady); cond != nil && cond.IsFalse() {
		return reconcile.Result{RequeueAfter: Resync}, nil
	}
	var list karpv1.NodeClaimList
	if err := c.live.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeClaims of NodePool %q: %w", np.Name, err)
	}
	n, active := count(list.Items)
	replicas := *np.Spec.Replicas
	log := logr.FromContextOrDiscard(ctx).WithValues("NodePool", np.Name, "desired", replicas,
		"active", n.Active, "pendingDisruption", n.PendingDisruption, "deleting", n.Deleting)

	if surplus := n.Active - replicas; surplus > 0 {
		return reconcile.Result{RequeueAfter: Resync}, c.scaleIn(ctx, log, np, active, int(surplus))
	}
	limit := nodeLimit(np)
	launch := ToLaunch(replicas, n, limit)
	if launch == 0 {
		if n.Active+n.PendingDisruption < replicas {
			log.Info("nodepool node limit reached", "limitNodes", *limit)
			return reconcile.Result{RequeueAfter: LimitRequeue}, nil
		}
		return reconcile.Result{RequeueAfter: Resync}, nil
	}
	log.Info("provisioning nodeclaims to satisfy replica count", "provisionCount", launch)
	var errs []error
	for range launch {
		nc := NodeClaim(np)
		if err := c.kube.Create(ctx, nc); err != nil {
			errs = append(errs, fmt.Errorf("creating NodeClaim for static NodePool %q: %w", np.Name, err))
			continue
		}
		karpentermetrics.NodeClaimCreated(nc, karpentermetrics.ReasonProvisioned)
		log.Info("created NodeClaim", "NodeClaim", nc.Name)
	}
	return reconcile.Result{RequeueAfter: Resync}, errors.Join(errs...)
}

// NodeClaim returns the NodeClaim a static NodePool launches, as
// Karpenter's NodeClaimTemplate builds it for a static NodePool
// (pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go@v1.14.0):
// the template's requirements plus one In requirement per label the
// NodeClaim carries (template labels, karpenter.sh/nodepool, the node
// class label) whose key the requirements do not name, no resource
// requests, and no instance-type requirement beyond the template's, so
// that the cloud provider launches the cheapest type the template
// allows. Labels, annotations (the NodePool hash), owner reference and
// spec are scheduling.NodeClaimPlan.NodeClaim's.
func NodeClaim(np *karpv1.NodePool) *karpv1.NodeClaim {
	reqs := make([]karpv1.NodeSelectorRequirementWithMinValues, 0, len(np.Spec.Template.Spec.Requirements)+len(np.Spec.Template.Labels)+2)
	named := map[string]bool{}
	for _, r := range np.Spec.Template.Spec.Requirements {
		reqs = append(reqs, *r.DeepCopy())
		named[r.Key] = true
	}
	labels := map[string]string{karpv1.NodePoolLabelKey: np.Name}
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		labels[karpv1.NodeClassLabelKey(ref.GroupKind())] = ref.Name
	}
	for k, v := range labels {
		if !named[k] {
			reqs = append(reqs, karpv1.NodeSelectorRequirementWithMinValues{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
		}
	}
	slices.SortStableFunc(reqs, func(a, b karpv1.NodeSelectorRequirementWithMinValues) int { return cmp.Compare(a.Key, b.Key) })
	nc := scheduling.NodeClaimPlan{NodePool: np, Requirements: reqs}.NodeClaim()
	// Karpenter's scheduler writes this annotation on the NodeClaims it
	// plans; a static NodeClaim is not planned and does not carry it.
	delete(nc.Annotations, karpv1.NodeClaimMinValuesRelaxedAnnotationKey)
	return nc
}

// scaleIn deletes surplus of the active NodeClaims, chosen by
// scaleInOrder. It returns the deletion errors.
func (c *Controller) scaleIn(ctx context.Context, log logr.Logger, np *karpv1.NodePool, active []*karpv1.NodeClaim, surplus int) error {
	victims := make([]victim, 0, len(active))
	for _, nc := range active {
		v := victim{nc: nc}
		if nc.Status.ProviderID != "" && nc.Status.NodeName != "" {
			var list corev1.PodList
			if err := c.kube.List(ctx, &list, client.MatchingFields{clusterstate.PodNodeNameField: nc.Status.NodeName}); err != nil {
				return fmt.Errorf("listing pods of Node %q: %w", nc.Status.NodeName, err)
			}
			for i := range list.Items {
				p := &list.Items[i]
				if !pods.Reschedulable(p) {
					continue
				}
				v.pods++
				if on, _, _ := pods.DoNotDisruptActive(p, c.clock.Now()); on {
					v.doNotDisrupt = true
				}
			}
		}
		victims = append(victims, v)
	}
	order := scaleInOrder(victims)
	log.Info("deprovisioning nodeclaims to satisfy replica count", "deprovisionCount", surplus)
	var errs []error
	for _, v := range order[:min(surplus, len(order))] {
		if err := c.kube.Delete(ctx, v.nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting NodeClaim %q of static NodePool %q: %w", v.nc.Name, np.Name, err))
			continue
		}
		log.Info("deleting nodeclaim", "NodeClaim", v.nc.Name, "node", v.nc.Status.NodeName, "pods", v.pods)
	}
	return errors.Join(errs...)
}

// victim is an active NodeClaim with what its scale-in would disrupt.
type victim struct {
	nc *karpv1.NodeClaim
	// pods counts the pods on its Node that would need another node
	// (pods.Reschedulable).
	pods int
	// doNotDisrupt is set when one of them has an active
	// karpenter.sh/do-not-disrupt.
	doNotDisrupt bool
}

// scaleInOrder returns vs in the order a scale-in deletes them, after
// Karpenter's static deprovisioning controller (getDeprovisioningCandidates,
// v1.14.0): NodeClaims not launched yet (no providerID) first, then those
// without a do-not-disrupt pod before those with one, then by fewest pods
// that would need another node (so empty nodes come first); ties by
// creation time, newest first, then by name. Karpenter ranks non-empty
// nodes by its rescheduling cost times the lifetime left; karpx uses the
// pod count. vs is not modified.
func scaleInOrder(vs []victim) []victim {
	out := slices.Clone(vs)
	slices.SortStableFunc(out, func(a, b victim) int {
		if la, lb := a.nc.Status.ProviderID != "", b.nc.Status.ProviderID != ""; la != lb {
			return boolOrder(la, lb)
		}
		if a.doNotDisrupt != b.doNotDisrupt {
			return boolOrder(a.doNotDisrupt, b.doNotDisrupt)
		}
		if a.pods != b.pods {
			return cmp.Compare(a.pods, b.pods)
		}
		if c := b.nc.CreationTimestamp.Compare(a.nc.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.nc.Name, b.nc.Name)
	})
	return out
}

// boolOrder sorts false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
