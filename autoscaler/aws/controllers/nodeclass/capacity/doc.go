// Package capacity is the learned-capacity controller (problem P3): when a
// Node launched by karpx registers, it records the Node's real
// status.allocatable in the capacity cache under the (instance type, AMI)
// key read from the Node's own labels, so the next decision plans with it,
// and copies it into the NodeClaim's status.allocatable, so that pods
// planned for an in-flight NodeClaim the real node cannot hold are planned
// again at once.
package capacity
