package clusterstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// EphemeralTaintKeys are the taints Kubernetes itself sets while a node
// starts or loses contact with the control plane; they never mean the node
// is unfit for the pods planned onto it. Source: Karpenter's
// KnownEphemeralTaints (sigs.k8s.io/karpenter pkg/scheduling/taints.go),
// plus karpenter.sh/unregistered, which registration removes.
var EphemeralTaintKeys = []string{
	corev1.TaintNodeNotReady,
	corev1.TaintNodeUnreachable,
	corev1.TaintNodeNetworkUnavailable,
	"node.cloudprovider.kubernetes.io/uninitialized",
	karpv1.UnregisteredTaintKey,
}

// Grace tells ExistingNodes how to see nodes that are still starting or
// briefly NotReady (problem P4). Without it (Snapshot.Grace nil) a Node
// whose NodeClaim is not Initialized is seen with its NodeClaim's
// spec.taints and every other Node as it is.
type Grace struct {
	// Window is how long after registration (while not Initialized) and
	// after initialisation a node keeps its grace, and how long a NotReady
	// node is still counted as there. Zero switches grace off: every Node
	// is seen with its own taints and allocatable from registration on.
	// Default in the operator: 5m (--initialization-grace-window).
	Window time.Duration
	// Now is the time of the pass.
	Now time.Time
	// AgentTaint reports whether a taint is put on new nodes by a node agent
	// that removes it once ready (Cilium's node.cilium.io/agent-not-ready
	// and the webhook's other rules). May be nil.
	AgentTaint func(corev1.Taint) bool
}

// inGrace reports whether the Node of nc is in flight or recently
// initialised.
func (g *Grace) inGrace(nc *karpv1.NodeClaim) bool {
	if nc == nil || g.Window <= 0 {
		return false
	}
	if init := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized); init.IsTrue() {
		return g.Now.Sub(init.LastTransitionTime.Time) < g.Window
	}
	reg := nc.StatusConditions().Get(karpv1.ConditionTypeRegistered)
	return !reg.IsTrue() || g.Now.Sub(reg.LastTransitionTime.Time) < g.Window
}

// briefNotReady reports whether n has been NotReady (or Unknown) for less
// than the window.
func (g *Grace) briefNotReady(n *corev1.Node) bool {
	if g.Window <= 0 {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return g.Now.Sub(c.LastTransitionTime.Time) < g.Window
		}
	}
	return false
}

// view returns the taints and the allocatable a scheduling pass should see
// for Node n of NodeClaim nc (may be nil).
func (g *Grace) view(n *corev1.Node, nc *karpv1.NodeClaim) ([]corev1.Taint, corev1.ResourceList) {
	allocatable := corev1.ResourceList(n.Status.Allocatable).DeepCopy()
	if g == nil {
		taints := n.Spec.Taints
		if nc != nil && !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			taints = nc.Spec.Taints
		}
		return taints, allocatable
	}
	starting, notReady := g.inGrace(nc), g.briefNotReady(n)
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		// A Node without a NodeClaim is never registered by karpx, so
		// its karpenter.sh/unregistered taint stays.
		if (starting || notReady) && isEphemeral(t) && (nc != nil || t.Key != karpv1.UnregisteredTaintKey) {
			continue
		}
		if starting && (isStartupTaint(nc, t) || (g.AgentTaint != nil && g.AgentTaint(t))) {
			continue
		}
		taints = append(taints, t)
	}
	if starting {
		// Extended resources (nvidia.com/gpu) appear when their device
		// plugin registers, after kubelet: count what the instance type
		// offers until then.
		for k, q := range nc.Status.Allocatable {
			if cur, ok := allocatable[k]; !ok || cur.IsZero() {
				allocatable[k] = q.DeepCopy()
			}
		}
	}
	return taints, allocatable
}

func isEphemeral(t corev1.Taint) bool {
	for _, k := range EphemeralTaintKeys {
		if t.Key == k {
			return true
		}
	}
	return false
}

func isStartupTaint(nc *karpv1.NodeClaim, t corev1.Taint) bool {
	for i := range nc.Spec.StartupTaints {
		if nc.Spec.StartupTaints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}
