package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// InitializationReasonSettle (2 s) is how long after registration (the
// Registered condition's lastTransitionTime) a new reason why the Node is
// not initialised yet waits before it is written; the reason registration
// found is written with Registered. A Node that starts well goes from
// NotReady through the node.kubernetes.io/not-ready taint to initialised
// within about a second, and each step was a status write of its own (two
// between Registered and Initialized in the NodeClaims sampled from a
// 500-pod head-to-head's audit log; with this wait, 561 of a 2,000-pod
// run's 714 NodeClaims had none); Karpenter folds such steps into the one
// write at the end of its lifecycle reconcile. A reason that lasts (a
// startup taint its agent never removes, a GPU that never appears) is
// written at most 2 s late; Initialized=True is never delayed. Registered's
// lastTransitionTime has whole seconds, so the wait is between 1 and 2 s in
// fact.
const InitializationReasonSettle = 2 * time.Second

// errNoJSONPatch stands for a registration that registrationPatch cannot
// write.
var errNoJSONPatch = errors.New("no JSON patch for this change")

func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	node, err := c.nodeFor(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		launched := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched)
		waited := c.opts.Clock.Now().Sub(launched.LastTransitionTime.Time)
		if waited >= c.opts.RegistrationTTL {
			log.Info("node did not register in time; deleting NodeClaim and terminating its instance",
				"providerID", nc.Status.ProviderID, "registrationTTL", c.opts.RegistrationTTL.String())
			msg := fmt.Sprintf("no Node with providerID %s registered within %s; terminating the instance (check the EC2NodeClass userData and the node's bootstrap logs)",
				nc.Status.ProviderID, c.opts.RegistrationTTL)
			c.recorder.Event(nc, corev1.EventTypeWarning, "RegistrationTimeout", msg)
			c.recordFailure(ctx, nc, "RegistrationTimeout", msg)
			if err := c.kube.Delete(ctx, nc); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			karpentermetrics.NodeClaimDisrupted(nc, karpentermetrics.ReasonRegistrationTimeout)
			return reconcile.Result{}, nil
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
	if !equality.Semantic.DeepEqual(stored, node) {
		locked := client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})
		err := errNoJSONPatch
		if patch, ok := registrationPatch(stored, node); ok {
			err = c.kube.Patch(ctx, node, patch)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			// The taints changed since the read (the JSON patch's test
			// failed: 422 Invalid), the change needs the whole Node, or the
			// server refused the JSON patch: the merge patch under the
			// Node's resourceVersion decides, and says whether the read
			// was stale.
			err = c.kube.Patch(ctx, node, locked)
		}
		if err != nil {
			if apierrors.IsConflict(err) {
				// Another writer (kwok or kubelet, the termination
				// controller) changed the Node since it was read: try
				// again soon from a fresh read.
				return reconcile.Result{RequeueAfter: clusterstate.ConflictRequeue}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}

	// One status write for both phases' news: Registered, and why the
	// Node is not initialised yet, judged on the Node as just written.
	storedNC := nc.DeepCopy()
	nc.Status.NodeName = node.Name
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
	if reason := notInitialized(nc, node); reason != "" {
		nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeInitialized, "NotInitialized", reason)
	}
	if err := c.patchStatus(ctx, nc, storedNC); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c.wrote(nc, phaseRegistered)
	log.Info("registered", "Node", node.Name)
	karpentermetrics.NodeRegistered(nc)
	if key, _, ok := c.healthKey(ctx, nc); ok {
		c.health.Success(key)
	}
	return c.initialize(ctx, nc, node)
}

// initialize records Initialized=True on nc, and the
// karpenter.sh/initialized label on node, once node is Ready without
// startup or known ephemeral taints and with every requested extended
// resource allocatable; until then it records why not
// (Initialized=Unknown, reason NotInitialized), writing only when that
// reason changes, and a change only once InitializationReasonSettle has
// passed since the registration.
func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (reconcile.Result, error) {
	if reason := notInitialized(nc, node); reason != "" {
		cur, reg := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized), nc.StatusConditions().Get(karpv1.ConditionTypeRegistered)
		if cur != nil && cur.Reason == "NotInitialized" && cur.Message != reason && reg.IsTrue() {
			if wait := InitializationReasonSettle - c.opts.Clock.Now().Sub(reg.LastTransitionTime.Time); wait > 0 {
				return reconcile.Result{RequeueAfter: wait}, nil
			}
		}
		stored := nc.DeepCopy()
		nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeInitialized, "NotInitialized", reason)
		if err := c.patchStatus(ctx, nc, stored); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		return reconcile.Result{}, nil // the Node watch wakes us
	}
	if node.Labels[karpv1.NodeInitializedLabelKey] != "true" {
		stored := node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[karpv1.NodeInitializedLabelKey] = "true"
		if err := c.kube.Patch(ctx, node, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	storedNC := nc.DeepCopy()
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	if err := c.patchStatus(ctx, nc, storedNC); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c.wrote(nc, phaseInitialized)
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
