package provisioning

import (
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// NominatedReason is the reason of the pod event that records a
// nomination ("Pod should schedule on: nodeclaim/<name>"), as Karpenter's.
const NominatedReason = "Nominated"

// nominations remembers, per pending pod, the NodeClaim a provisioning pass
// planned it onto. Kept in memory: after a restart the first pass plans
// pods onto in-flight NodeClaims again and nominates them anew.
type nominations struct {
	mu    sync.Mutex
	byPod map[types.UID]string // pod UID → NodeClaim name
}

func (n *nominations) get(uid types.UID) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byPod[uid]
}

// set records a nomination and reports whether it is new or changed.
func (n *nominations) set(uid types.UID, claim string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byPod == nil {
		n.byPod = map[types.UID]string{}
	}
	if n.byPod[uid] == claim {
		return false
	}
	n.byPod[uid] = claim
	return true
}

// keepOnly forgets the pods not in pending (bound, deleted or finished).
func (n *nominations) keepOnly(pending []*corev1.Pod) {
	keep := make(map[types.UID]bool, len(pending))
	for _, p := range pending {
		keep[p.UID] = true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for uid := range n.byPod {
		if !keep[uid] {
			delete(n.byPod, uid)
		}
	}
}

func (n *nominations) forget(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.byPod, uid)
}

// NominationHolds reports whether pods nominated to nc should keep waiting
// for it at now: nc is not being deleted and is not yet Initialized, and
// it is within its TTLs — launched within launchTTL of its creation,
// registered within registrationTTL of its launch, and initialised within
// initTimeout of its registration (durations in seconds' resolution, as
// the conditions record them). It returns false for a nil nc.
func NominationHolds(nc *karpv1.NodeClaim, now time.Time, launchTTL, registrationTTL, initTimeout time.Duration) bool {
	if nc == nil || !nc.DeletionTimestamp.IsZero() {
		return false
	}
	conds := nc.StatusConditions()
	launched, registered := conds.Get(karpv1.ConditionTypeLaunched), conds.Get(karpv1.ConditionTypeRegistered)
	switch {
	case conds.Get(karpv1.ConditionTypeInitialized).IsTrue():
		return false
	case !launched.IsTrue():
		return now.Sub(nc.CreationTimestamp.Time) < launchTTL
	case !registered.IsTrue():
		return now.Sub(launched.LastTransitionTime.Time) < registrationTTL
	default:
		return now.Sub(registered.LastTransitionTime.Time) < initTimeout
	}
}

// stillFits reports whether pod, nominated to nc, can still go on nc's
// Node as far as the pods there allow: it is false only when the
// scheduler places pod on that Node alone as if it were empty (no pod
// bound or nominated there) but not beside those pods (their room, or the
// hostname a required anti-affinity term excludes). kube-scheduler binds
// any pod that fits to a new Node, not the one karpx planned for it; a pod
// whose Node another pod took waited for the NodeClaim to initialise
// before it was planned again, while the node planned for the pod that
// took its place stood empty. A Node that does not take the pod even
// empty is still starting (labels, an extended resource such as
// nvidia.com/gpu or a taint not there yet; scenario P4): the nomination
// holds, as it does while the NodeClaim has no Node. nodes is
// in.ExistingNodes as waitForNominations fills it.
func stillFits(in scheduling.Input, state *clusterstate.Snapshot, nc *karpv1.NodeClaim, pod *corev1.Pod) bool {
	n := state.NodeOf(nc)
	if n == nil {
		return true
	}
	i := slices.IndexFunc(in.ExistingNodes, func(e scheduling.ExistingNode) bool { return e.Name == n.Name })
	if i < 0 {
		return false
	}
	fits := func(node scheduling.ExistingNode) bool {
		out := scheduling.Solve(scheduling.Input{Pods: []*corev1.Pod{pod}, ExistingNodes: []scheduling.ExistingNode{node},
			DaemonSetPods: in.DaemonSetPods, VolumeRequirements: in.VolumeRequirements, NamespaceLabels: in.NamespaceLabels})
		return len(out.ExistingPlacements[n.Name]) == 1
	}
	now := in.ExistingNodes[i]
	now.Available = now.Available.DeepCopy()
	if fits(now) {
		return true
	}
	empty := now
	empty.Pods = nil
	empty.Available = now.Available.DeepCopy()
	for _, p := range now.Pods {
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		for k, q := range req {
			if cur, ok := empty.Available[k]; ok {
				cur.Add(q)
				empty.Available[k] = cur
			}
		}
	}
	return !fits(empty)
}

// claimOf returns the NodeClaim behind an existing node's name when it is
// not Initialized yet (pods placed there are nominated to it), or nil.
func claimOf(state *clusterstate.Snapshot, existing string) *karpv1.NodeClaim {
	if state == nil {
		return nil
	}
	nc := state.NodeClaimOf[existing]
	if name, ok := strings.CutPrefix(existing, "nodeclaim/"); ok && nc == nil {
		nc = state.NodeClaims[name]
	}
	if nc == nil || nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		return nil
	}
	return nc
}
