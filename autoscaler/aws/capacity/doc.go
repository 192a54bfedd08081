// Package capacity is the learned-capacity cache (problem P3): what a node
// of an instance type booted from an AMI really offers to pods.
//
// Entries are keyed by (instance type, AMI ID), because the AMI decides
// what the OS and its daemons reserve (an NVIDIA image reserves more than a
// standard one). The first value of a key is an estimate, Estimate: the
// catalogue's allocatable adjusted for the EC2NodeClass's spec.kubelet
// (maxPods, podsPerCore, kubeReserved, systemReserved, evictionHard). When
// a Node of that key registers, its status.allocatable, looked up with the
// instance type and AMI from the Node's own labels, replaces the estimate
// (Observe) and is used by every later decision. The cache is a
// golang-lru/v2 expirable LRU; Entries and Handler let `kubectl karpx
// capacity` show estimate against observed, with ages.
package capacity
