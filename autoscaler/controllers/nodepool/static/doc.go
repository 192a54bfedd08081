// Package static is static capacity: Karpenter v1.14's static NodePools
// (sigs.k8s.io/karpenter pkg/controllers/static/provisioning and
// .../static/deprovisioning, designs/static-capacity.md), behind its
// feature gate StaticCapacity (default off, --feature-gates
// StaticCapacity=true).
//
// A NodePool with spec.replicas keeps that many NodeClaims whatever the
// pods ask for. One controller reconciles each static NodePool, on its
// creation, on a change of spec.replicas or of its NodeClassReady
// condition, on a NodeClaim of it being created or deleted, and once a
// minute (nothing is launched while NodeClassReady is False):
//
//   - it counts the NodePool's NodeClaims, read from the API server (not
//     the informer cache, so that NodeClaims it has just created are
//     never missed and launched twice): active (not being deleted and
//     not being replaced by disruption), pending disruption (annotated
//     with disruption's replacements) and deleting;
//   - below spec.replicas (active plus pending disruption) it creates
//     the missing NodeClaims from the NodePool's template, with no
//     instance-type requirement of their own: the cloud provider picks
//     the cheapest offering the template allows at launch, as Karpenter's
//     CloudProvider.Create does. spec.limits.nodes caps active, pending
//     disruption and deleting NodeClaims together, so a NodeClaim still
//     terminating holds its place in the limit until it is gone;
//   - above spec.replicas (active only) it deletes the surplus: NodeClaims
//     not launched yet first, then NodeClaims whose node runs no pod that
//     would need another node (DaemonSet pods aside), then the rest by
//     fewest such pods, those with a pod under karpenter.sh/do-not-disrupt
//     last. Like Karpenter, the scale-in is a user's request and does not
//     wait for disruption budgets; the termination path (package
//     termination) drains each node through the Eviction API, so
//     PodDisruptionBudgets and terminationGracePeriod hold as for any
//     deletion.
//
// Pending pods never launch a static NodePool's nodes (the scheduler
// refuses the NodePool, autoscaler/scheduling), its nodes are never
// consolidated (package disruption), and they take pods like any node.
//
// Time is read from an injected clock (k8s.io/utils/clock) for
// do-not-disrupt's duration form.
package static
