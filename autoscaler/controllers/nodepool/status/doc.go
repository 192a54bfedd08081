// Package status keeps each NodePool's status as Karpenter users read it:
// status.nodes and status.resources (the capacity of its NodeClaims), and
// the conditions ValidationSucceeded, NodeClassReady (its EC2NodeClass
// exists) and NodeRegistrationHealthy (False, naming the cause and the
// EC2NodeClass field to fix, while launches for the pair are paused after
// repeated failures), which together make Ready. It is level-triggered: it
// recomputes everything from current state on every NodePool, NodeClaim or
// EC2NodeClass change and at least every ResyncPeriod.
package status
