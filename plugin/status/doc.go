// Package status implements `kubectl karpx status`, an overview of the
// cluster's Karpenter capacity: one table of NodePools (node class, node
// count, CPU and memory provisioned against the pool's limits, readiness,
// weight) and one of NodeClaims (pool, instance type, zone, capacity type,
// lifecycle phase, node, age).
//
// The command reads karpenter.sh/v1 NodePools and NodeClaims through a
// cluster.Factory and prints them as tables with cli-runtime's table
// printer, or, with -o json|yaml|name|jsonpath=…, as a v1 List holding the
// NodePools followed by the NodeClaims, like `kubectl get
// nodepools,nodeclaims -o json`.
//
// Under the tables, a "Capacity reservations" table lists each
// EC2NodeClass's status.capacityReservations (id, type, instance type,
// zone, free/total places from the controller's report, end, state).
package status
