package disruption

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	podset "github.com/karpx/karpx/autoscaler/state/pods"
)

// Annotations karpx writes while a replacement-first command is under way.
const (
	// ReplacementsAnnotationKey, on a NodeClaim being replaced, lists the
	// comma-separated names of the NodeClaims launched to take its pods.
	// The old NodeClaim is deleted once they are all Initialized.
	ReplacementsAnnotationKey = "karpx.io/disruption-replacements"
	// ReasonAnnotationKey, beside ReplacementsAnnotationKey, is the
	// disruption reason (Drifted, Expired, Underutilized).
	ReasonAnnotationKey = "karpx.io/disruption-reason"
	// ReplacementForAnnotationKey, on a replacement NodeClaim, lists the
	// NodeClaims it replaces. A replacement is never itself a candidate
	// while one of them exists.
	ReplacementForAnnotationKey = "karpx.io/replacement-for"
)

// Reasons, as in karpenter.sh/v1 budgets (Empty, Underutilized, Drifted)
// plus Expired, which only budgets without reasons limit.
const (
	ReasonEmpty         = string(karpv1.DisruptionReasonEmpty)
	ReasonUnderutilized = string(karpv1.DisruptionReasonUnderutilized)
	ReasonDrifted       = string(karpv1.DisruptionReasonDrifted)
	ReasonExpired       = "Expired"
)

// candidate is an Initialized NodeClaim with its Node, NodePool and pods.
type candidate struct {
	nc   *karpv1.NodeClaim
	node *corev1.Node
	pool *karpv1.NodePool
	// pods are the reschedulable pods (podset.Reschedulable).
	pods []*corev1.Pod
	// price is the hourly price in USD of its offering; 0 when unknown.
	price float64
	// blocked says why no method may disrupt the node ("" when none).
	blocked string
	// blockedByPods is true when blocked names a pod (its
	// karpenter.sh/do-not-disrupt or a PodDisruptionBudget), not the Node
	// or the NodeClaim: drift disregards such a block on a NodeClaim with
	// a terminationGracePeriod (eventualBlock).
	blockedByPods bool
	// unmodelled says why consolidation may not move its pods.
	unmodelled string
	// consolidatableAt is when consolidateAfter has passed since the last
	// pod event or initialisation; zero when consolidateAfter is Never.
	consolidatableAt time.Time
}

func (c *candidate) name() string { return c.nc.Name }

// consolidatable reports whether the candidate may be consolidated at now.
func (c *candidate) consolidatable(now time.Time) bool {
	return !c.consolidatableAt.IsZero() && !now.Before(c.consolidatableAt)
}

// consolidatableAt returns when nc becomes consolidatable in pool: its
// spec.disruption.consolidateAfter after the latest of its initialisation,
// its status.lastPodEventTime and podEvent (the newest pod event seen on
// its Node, which PodEvents may not have written yet; zero for none). It
// returns the zero time for
// consolidateAfter: Never, for a NodeClaim not Initialized and for a
// static NodePool (spec.replicas), whose nodes are never emptied or
// consolidated (Karpenter v1.14's Emptiness and consolidation skip
// OwnedByStaticNodePool candidates, pkg/controllers/disruption).
func consolidatableAt(nc *karpv1.NodeClaim, pool *karpv1.NodePool, podEvent time.Time) time.Time {
	after := pool.Spec.Disruption.ConsolidateAfter.Duration
	init := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized)
	if pool.Spec.Replicas != nil || after == nil || init == nil || !init.IsTrue() {
		return time.Time{}
	}
	base := init.LastTransitionTime.Time
	for _, t := range []time.Time{nc.Status.LastPodEventTime.Time, podEvent} {
		if t.After(base) {
			base = t
		}
	}
	return base.Add(*after)
}

// doNotDisrupt reports whether obj (a NodeClaim or Node) carries
// karpenter.sh/do-not-disrupt: "true", the only value Karpenter reads on
// them (StateNode.ValidateNodeDisruptable,
// pkg/controllers/state/statenode.go@v1.14.0).
func doNotDisrupt(obj metav1.Object) bool {
	return obj.GetAnnotations()[karpv1.DoNotDisruptAnnotationKey] == "true"
}

// eventualBlock returns why an eventual disruption (drift) may not start
// on the candidate now, or "": its block (blocked), except that a block
// by a pod (blockedByPods) does not hold a NodeClaim with a
// spec.terminationGracePeriod, as in Karpenter's NewCandidate for the
// eventual disruption class (pkg/controllers/disruption/types.go@v1.14.3):
// the node is replaced, and its drain waits for that pod until the
// terminationGracePeriod deadline (package termination).
func (c *candidate) eventualBlock() string {
	if c.blockedByPods && c.nc.Spec.TerminationGracePeriod != nil {
		return ""
	}
	return c.blocked
}

// blockedBy returns why the node must not be disrupted by any method at
// now, or "": do-not-disrupt on the NodeClaim, the Node or one of its pods
// (podDoNotDisrupt), or a pod that a PodDisruptionBudget allowing no
// disruption covers. byPods is true when the reason is a pod.
func blockedBy(nc *karpv1.NodeClaim, node *corev1.Node, pods []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget, now time.Time) (why string, byPods bool) {
	switch {
	case doNotDisrupt(nc):
		return fmt.Sprintf("NodeClaim has %s", karpv1.DoNotDisruptAnnotationKey), false
	case doNotDisrupt(node):
		return fmt.Sprintf("Node has %s", karpv1.DoNotDisruptAnnotationKey), false
	}
	for _, pod := range pods {
		if active, until, _ := podset.DoNotDisruptActive(pod, now); active {
			if !until.IsZero() {
				return fmt.Sprintf("pod %s/%s has %s until %s", pod.Namespace, pod.Name, karpv1.DoNotDisruptAnnotationKey, until.UTC().Format(time.RFC3339)), true
			}
			return fmt.Sprintf("pod %s/%s has %s", pod.Namespace, pod.Name, karpv1.DoNotDisruptAnnotationKey), true
		}
		if pdb := blockingPDB(pod, pdbs); pdb != "" {
			return fmt.Sprintf("PodDisruptionBudget %s allows no disruption of pod %s/%s", pdb, pod.Namespace, pod.Name), true
		}
	}
	return "", false
}

// blockingPDB returns the PodDisruptionBudget ("namespace/name") that would
// refuse pod's eviction now: one selecting it with no disruption allowed,
// or any of several selecting it (the Eviction API refuses pods with more
// than one). "" when eviction is allowed.
func blockingPDB(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) string {
	var matched []string
	allowed := true
	for i := range pdbs {
		pdb := &pdbs[i]
		if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		matched = append(matched, pdb.Namespace+"/"+pdb.Name)
		if pdb.Status.DisruptionsAllowed <= 0 {
			allowed = false
		}
	}
	if len(matched) > 1 || (len(matched) == 1 && !allowed) {
		return strings.Join(matched, ",")
	}
	return ""
}

// reschedulable returns the pods of a node that need another node.
func reschedulable(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if podset.Reschedulable(p) {
			out = append(out, p)
		}
	}
	return out
}

// priceOf returns the hourly price in USD of the offering a node with
// these labels runs on (instance type, zone, capacity type), or 0.
func priceOf(types []*cloudprovider.InstanceType, l map[string]string) float64 {
	for _, it := range types {
		if it.Name != l[corev1.LabelInstanceTypeStable] {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == l[corev1.LabelTopologyZone] && o.CapacityType == l[karpv1.CapacityTypeLabelKey] {
				return o.PriceUSDPerHour
			}
		}
	}
	return 0
}
