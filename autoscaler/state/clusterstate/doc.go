// Package clusterstate reads, from the manager's informer cache, the nodes a
// scheduling pass may place pods on: every live Node (karpx's and others)
// with its pods and free capacity, and every NodeClaim still on its way
// (launching or registering) with the capacity it will have. Provisioning
// fills them before planning new NodeClaims; consolidation asks whether a
// candidate's pods fit on them. One reader serves both, so both decide on
// the same picture of the cluster.
package clusterstate
