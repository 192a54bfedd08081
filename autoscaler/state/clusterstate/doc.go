// Package clusterstate is the cloud-neutral view of the cluster that the
// provisioning and disruption controllers, the termination and NodeClaim
// lifecycle controllers and `kubectl karpx` share, read from the manager's
// informer cache.
//
// Read returns the nodes a scheduling pass may place pods on: every live
// Node (karpx's and others) with its pods and free capacity, and every
// NodeClaim still on its way (launching or registering) with the capacity
// it will have; Grace says how a node still starting is seen, and Reserve
// holds a pod's room on the in-flight NodeClaim it waits for. Provisioning
// fills them before planning new NodeClaims; consolidation asks whether a
// candidate's pods fit on them. One reader serves both, so both decide on
// the same picture of the cluster. NodePoolInputs (with Remaining) and
// DaemonSetPods build the rest of a pass's scheduling input the same way
// for both.
//
// It also declares what the controllers share about nodes rather than
// import from each other: the cache's field indexes (IndexFields and its
// *Field names), the karpenter.sh/disrupted taint (SetDisruptedTaint), the
// pace at which a leaving Node is looked at (DrainRequeue), and the node
// agents' startup taints (AgentTaint).
package clusterstate
