// Package scheduling decides which nodes to launch for pending pods: one
// pure function, Solve, that makes no API calls, reads an Input (pods,
// NodePools with their instance types, in-flight nodes, DaemonSet pods) and
// returns a Result (NodeClaim plans, placements on in-flight nodes, and a
// reason for every pod that fits nowhere). It is a four-step pipeline, one
// file and one small function per step: candidates (candidates.go, newPool)
// keeps, per NodePool, the instance types and available offerings that
// satisfy its requirements and template labels; filter (filter.go, pool.fit)
// narrows them per pod by taints and tolerations, nodeSelector and required
// node affinity, cached per set of pod constraints; pack (pack.go,
// solver.place) goes through the pods by decreasing cpu then memory and puts
// each first-fit onto an in-flight node, else onto an open plan that still
// has an instance type fitting all its pods, else onto a new plan of the
// first NodePool (by descending weight, then name) that can take it within
// its limits; price (price.go, plan.finish) orders each plan's types by
// their cheapest compatible available offering, keeps at most
// MaxInstanceTypes of them (never breaking minValues) and narrows the
// NodeClaim requirements (instance type, zone, capacity type) to what they
// allow. NodeClaimPlan.NodeClaim turns a plan into the object to create.
//
// Karpenter semantics kept: pod requests as the kubelet admits them (init
// and sidecar containers, overhead, one "pods"); startupTaints and
// karpenter.sh/unregistered never block a pod; NodePool requirements with
// In, NotIn, Exists, DoesNotExist, Gt, Gte, Lt, Lte and minValues; labels
// instance types do not carry (template labels, custom labels) checked
// against the NodePool's labels and requirements; in-flight capacity and
// open plans used before a new node, regardless of NodePool weight, as in
// Karpenter. Not modelled yet (the pods still get a node, just without
// these constraints): preferred node affinity, pod affinity and
// anti-affinity, topology spread constraints, host ports and volume
// topology. DaemonSet overhead is decided per NodePool, not per instance
// type; minValues is strict (no BestEffort relaxation).
package scheduling
