// Package disruption removes nodes karpx no longer needs, as Karpenter v1
// documents it: emptiness, consolidation (delete a node whose pods fit
// elsewhere, or replace one or several nodes with one cheaper node), drift
// (Karpenter v1.14's checks and Drifted reasons: the NodePool template or
// requirements, the instance type no longer offered, the EC2NodeClass, its
// AMI, subnets or security groups) and expiry (spec.expireAfter).
//
// Expiry is forceful, as in Karpenter v1: a NodeClaim older than its
// spec.expireAfter is deleted in the next pass whatever its budgets,
// karpenter.sh/do-not-disrupt or PodDisruptionBudgets say, with no
// replacement launched first; the drain is bounded by its
// spec.terminationGracePeriod.
//
// The Controller is level-triggered. Every pass (on a period of at most
// 10 s, on pod, Node, NodeClaim and NodePool events, and when the next
// NodeClaim becomes consolidatable) it rebuilds its view from the informer
// cache and decides from that alone. The only state that outlives a pass is
// written to the API server: a NodeClaim's status.lastPodEventTime (kept by
// the PodEvents controller), its Consolidatable and Drifted conditions, and,
// while a replacement launches, the karpx.io/disruption-replacements
// annotation on the node being replaced together with the
// karpenter.sh/disrupted taint on its Node. A restarted or newly elected
// controller therefore resumes at once, and no missed event can wedge it
// (problem P5). The one thing kept in memory is the newest pod event of
// each Node that PodEvents has not written yet (it writes at most once per
// PodEventDedupe, 10 s): a restart loses it, and consolidateAfter then
// counts from up to 10 s before the last pod event, as Karpenter's always
// may.
//
// Interruption (a NodeClaim marked by package interruption: a spot
// interruption warning, a scheduled change, an instance stopping or
// shutting down) is a method too, tried first and forced as in Karpenter:
// no budget or do-not-disrupt holds it, it is never abandoned, and the node
// is drained once its replacements are Initialized or at its
// karpx.io/interruption-drain-by time, whichever comes first. No moved pod
// is ever planned onto an interrupted node.
//
// Every other method respects, per NodePool, the disruption budgets
// (spec.disruption.budgets: nodes as a count or percentage, schedule and
// duration, reasons), karpenter.sh/do-not-disrupt on pods, Nodes and
// NodeClaims, PodDisruptionBudgets that allow no disruption, and the
// NodePool limits (a replacement is planned by the same scheduling code as
// provisioning). Drift, an eventual disruption in Karpenter v1.14, is not
// held by a pod's do-not-disrupt or PodDisruptionBudget when the NodeClaim
// has a spec.terminationGracePeriod: the node is replaced and its drain
// waits for such pods until that deadline. Pods whose constraints that code does not model block
// their node's consolidation. Consolidation simulates scheduling with every
// pending pod included, and with the pods still on nodes being deleted or
// tainted karpenter.sh/disrupted, which need room elsewhere, as Karpenter's
// SimulateScheduling does: a node that pending pods will land on is no
// candidate, and a command is a plain delete only when no
// pod, pending ones included, would need a new node. Consolidation also
// starts no command while a pod is moving between nodes (on a draining
// node still to be evicted, or not judged by kube-scheduler yet; each for
// at most PodMoveWindow): kube-scheduler places moving pods by its own
// scores, not where the simulation did, so the next command is simulated
// from where they have landed. Replacements are
// launched and Initialized before the old node is deleted; deletion goes
// through package termination's drain. A consolidation command's old node
// is drained under the same rule (no pod moving, for at most
// ReplacementTimeout after its replacements are Initialized; one drain at
// a time) and
// only while its pods still fit on the nodes ready for them: another
// drain's pods may have taken its empty replacement, and the command is
// then abandoned, the replacements that took pods kept. Each decision is an event on the NodeClaim and the
// Node naming the method and reason, and a karpx_disruption_decisions_total
// sample.
package disruption
