// Package nodeclaims implements `kubectl karpx nodeclaims`: each
// NodeClaim's lifecycle phase, the time it spent in each phase, the number
// of pods nominated to it (from the autoscaler's Nominated pod events) and
// what keeps it from being Initialized (NotReady, startup and ephemeral
// taints, requested extended resources not yet allocatable).
package nodeclaims
