package disruption

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	podset "github.com/karpx/karpx/autoscaler/state/pods"
)

// PodMoveWindow is how long a terminating pod on a draining node, or a
// pod kube-scheduler has not judged yet, holds consolidation (see
// moving), counted from the request to delete the first and from the
// creation of the second. The ReplicaSet controller recreates an evicted
// pod and kube-scheduler judges a new one within moments; a pod still
// unjudged after this long waits for something else (another scheduler,
// one that is down), and a pod with a long grace period would otherwise
// hold consolidation for that long. 30 s is karpx's own
// choice: Karpenter v1.14 has no such wait (it waits 15 s before every
// consolidation command instead, commandValidationDelay,
// pkg/controllers/disruption/controller.go).
const PodMoveWindow = 30 * time.Second

// moving returns one pod ("namespace/name" and why) that is moving
// between nodes now, "" when none is. Consolidation starts no command
// while one is: its simulation places each moving pod where the scheduler
// packs it best, but kube-scheduler places it by its own scores, and a
// pod of one drain may take the room (an anti-affinity slot, the only
// node big enough) that the simulation gave a pod of the next. The next
// drain's pod then finds no room and waits Pending for a new node. Once
// the pods have landed, the next simulation starts from where they are.
// A pod is moving when it is:
//   - bound to a Node being drained (the Node or its NodeClaim is being
//     deleted) and about to be evicted: reschedulable, with neither an
//     active karpenter.sh/do-not-disrupt nor a PodDisruptionBudget that
//     refuses its eviction (such a pod moves only when that changes);
//   - bound to such a Node and terminating, for PodMoveWindow after its
//     deletion was requested (its replacement may not exist yet);
//   - not bound and not judged by kube-scheduler yet
//     (podset.AwaitingScheduler), for PodMoveWindow after its creation.
//
// Pods of a node that waits for its replacements (tainted
// karpenter.sh/disrupted, not deleted yet) do not move until the
// replacements are Initialized; they do not hold consolidation, and the
// simulation counts them as leaving.
func moving(s *state) string {
	for _, name := range slices.Sorted(maps.Keys(s.cluster.Pods)) {
		if !s.draining(name) {
			continue
		}
		for _, p := range s.cluster.Pods[name] {
			switch {
			case !podset.Evictable(p):
			case !p.DeletionTimestamp.IsZero():
				if requested := deletionRequested(p); s.now.Before(requested.Add(PodMoveWindow)) {
					return fmt.Sprintf("pod %s/%s is terminating on draining Node %s", p.Namespace, p.Name, name)
				}
			case blockingPDB(p, s.pdbs) != "":
			default:
				if active, _, _ := podset.DoNotDisruptActive(p, s.now); !active {
					return fmt.Sprintf("pod %s/%s is on draining Node %s", p.Namespace, p.Name, name)
				}
			}
		}
	}
	for _, p := range s.cluster.Unbound {
		if podset.Reschedulable(p) && podset.AwaitingScheduler(p) && s.now.Before(p.CreationTimestamp.Add(PodMoveWindow)) {
			return fmt.Sprintf("pod %s/%s waits for kube-scheduler", p.Namespace, p.Name)
		}
	}
	return ""
}

// draining reports whether Node name is being drained: the Node or its
// NodeClaim is being deleted. false for a Node s does not hold.
func (s *state) draining(name string) bool {
	node, nc := s.cluster.Nodes[name], s.cluster.NodeClaimOf[name]
	return node != nil && (!node.DeletionTimestamp.IsZero() || (nc != nil && !nc.DeletionTimestamp.IsZero()))
}

// deletionRequested returns when pod's deletion was requested: its
// deletionTimestamp is that moment plus the grace period granted
// (metadata.deletionGracePeriodSeconds).
func deletionRequested(pod *corev1.Pod) time.Time {
	at := pod.DeletionTimestamp.Time
	if pod.DeletionGracePeriodSeconds != nil {
		at = at.Add(-time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
	}
	return at
}
