package health

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// Name is the controller's name, Karpenter's ("node.health").
const Name = "node.health"

// ReasonNodeRepairBlocked is the reason of the Warning event a Node gets
// while its repair is held back by the unhealthy cap (Karpenter's
// events.NodeRepairBlocked, pkg/events/reason.go@v1.14.0).
const ReasonNodeRepairBlocked = "NodeRepairBlocked"

// AllowedUnhealthyPercent is the share of a NodePool's Nodes (or of the
// cluster's, for a NodeClaim of no NodePool) that may be unhealthy, the
// count rounded up as a PodDisruptionBudget's maxUnavailable is, with
// repair still going on: with 3 Nodes one, with 10 two. Karpenter's
// allowedUnhealthyPercent (pkg/controllers/node/health/controller.go@v1.14.0).
var AllowedUnhealthyPercent = intstr.FromString("20%")

// BlockedRequeue is how long a Node whose repair the cap holds back waits
// before it is looked at again (Karpenter's 5 minutes, same file); a
// change of any Node condition wakes it sooner.
const BlockedRequeue = 5 * time.Minute

// Controller repairs Nodes whose conditions stay unhealthy (see the
// package documentation). Create it with New.
type Controller struct {
	kube     client.Client
	policies []cloudprovider.RepairPolicy
	recorder record.EventRecorder
	clock    clock.PassiveClock
}

// New returns a Controller for the repair policies (at least one; see
// cloudprovider.RepairPolicyProvider). kube must be a cached client whose
// cache indexes NodeClaims by clusterstate.NodeClaimProviderIDField; clk
// nil means the real clock.
func New(kube client.Client, policies []cloudprovider.RepairPolicy, recorder record.EventRecorder, clk clock.PassiveClock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, policies: policies, recorder: recorder, clock: clk}
}

// Register adds the controller to mgr. It reconciles a Node when it is
// created and when one of its conditions appears, disappears, or changes
// status or lastTransitionTime (heartbeats alone do not wake it).
func (c *Controller) Register(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(Name).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return conditionsChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(c)
}

// conditionsChanged reports whether a condition of the Node appeared,
// disappeared or changed its status or lastTransitionTime.
func conditionsChanged(old, cur *corev1.Node) bool {
	if len(old.Status.Conditions) != len(cur.Status.Conditions) {
		return true
	}
	for _, o := range old.Status.Conditions {
		n := condition(cur, o.Type)
		if n == nil || n.Status != o.Status || !n.LastTransitionTime.Equal(&o.LastTransitionTime) {
			return true
		}
	}
	return false
}

// condition returns the Node's condition of type t, or nil.
func condition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// Reconcile repairs one Node when a policy's toleration has run out and
// the cap allows it, or requeues for when it will run out. It returns the
// API server's errors (the request is retried with backoff).
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.Spec.ProviderID == "" || !node.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	cond, tolerate := c.unhealthy(node)
	if cond == nil {
		return reconcile.Result{}, nil
	}
	nc, err := c.nodeClaimFor(ctx, node)
	if err != nil || nc == nil {
		return reconcile.Result{}, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("Node", node.Name, "NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey],
		"condition", string(cond.Type), "status", string(cond.Status), "since", cond.LastTransitionTime.UTC().Format(time.RFC3339))
	now := c.clock.Now()
	if due := cond.LastTransitionTime.Add(tolerate); now.Before(due) {
		return reconcile.Result{RequeueAfter: due.Sub(now)}, nil
	}

	pool, inPool := nc.Labels[karpv1.NodePoolLabelKey]
	var scope []client.ListOption
	where := "cluster"
	if inPool {
		scope = append(scope, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
		where = "nodepool"
	}
	unhealthy, total, allowed, err := c.unhealthyCount(ctx, scope...)
	if err != nil {
		return reconcile.Result{}, err
	}
	if unhealthy > allowed {
		msg := fmt.Sprintf("more than %s nodes are unhealthy in the %s", AllowedUnhealthyPercent.String(), where)
		log.Info("node repair blocked", "unhealthy", unhealthy, "nodes", total, "allowed", allowed)
		c.recorder.Event(node, corev1.EventTypeWarning, ReasonNodeRepairBlocked, msg)
		return reconcile.Result{RequeueAfter: BlockedRequeue}, nil
	}

	// A NodeClaim already being deleted (consolidation, expiry) is
	// annotated too: its drain stops waiting on a broken node.
	if err := c.annotateTermination(ctx, nc, now); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !nc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log.Info("deleting unhealthy node", "tolerationDuration", tolerate.String())
	karpentermetrics.NodeClaimRepaired(nc, string(cond.Type))
	return reconcile.Result{}, nil
}

// unhealthy returns the Node's condition that matches a policy and whose
// toleration runs out first, with that policy's toleration duration; nil
// when none matches.
func (c *Controller) unhealthy(node *corev1.Node) (*corev1.NodeCondition, time.Duration) {
	var found *corev1.NodeCondition
	var tolerate time.Duration
	var due time.Time
	for _, p := range c.policies {
		cond := condition(node, p.ConditionType)
		if cond == nil || cond.Status != p.ConditionStatus {
			continue
		}
		if d := cond.LastTransitionTime.Add(p.TolerationDuration); found == nil || d.Before(due) {
			found, tolerate, due = cond, p.TolerationDuration, d
		}
	}
	return found, tolerate
}

// unhealthyCount counts the Nodes the options select and those of them a
// policy matches (whatever its duration), and returns how many may be
// unhealthy with repair going on (AllowedUnhealthyPercent, rounded up).
func (c *Controller) unhealthyCount(ctx context.Context, opts ...client.ListOption) (unhealthy, total, allowed int, err error) {
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return 0, 0, 0, fmt.Errorf("listing Nodes: %w", err)
	}
	for i := range nodes.Items {
		if cond, _ := c.unhealthy(&nodes.Items[i]); cond != nil {
			unhealthy++
		}
	}
	total = len(nodes.Items)
	allowed, err = intstr.GetScaledValueFromIntOrPercent(&AllowedUnhealthyPercent, total, true)
	return unhealthy, total, allowed, err
}

// annotateTermination sets karpenter.sh/nodeclaim-termination-timestamp
// to now unless it already holds an earlier time: the termination path
// deletes the Node's pods by then instead of evicting them, as Karpenter's
// node health controller has it (annotateTerminationGracePeriod).
func (c *Controller) annotateTermination(ctx context.Context, nc *karpv1.NodeClaim, now time.Time) error {
	if v, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		if t, err := time.Parse(time.RFC3339, v); err == nil && t.Before(now) {
			return nil
		}
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = now.UTC().Format(time.RFC3339)
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return fmt.Errorf("annotating NodeClaim %s for repair: %w", nc.Name, err)
	}
	return nil
}

// nodeClaimFor returns the NodeClaim with node's providerID, or nil (a
// Node karpx does not manage).
func (c *Controller) nodeClaimFor(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.MatchingFields{clusterstate.NodeClaimProviderIDField: node.Spec.ProviderID}); err != nil {
		return nil, fmt.Errorf("listing NodeClaims with providerID %s: %w", node.Spec.ProviderID, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}
