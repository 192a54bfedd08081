// Package expiration drains the nodes of a Capacity Block before EC2
// terminates them, as Karpenter v1.14's capacityreservation.expiration
// controller does (aws/karpenter-provider-aws
// pkg/controllers/capacityreservation/expiration/controller.go@v1.14.3).
//
// EC2 begins terminating the instances still running in a Capacity Block
// 30 minutes before its end, and warns 40 minutes before it (EC2 User
// Guide, "Work with Capacity Blocks" and "Monitor Capacity Blocks using
// EventBridge"). The Controller, a leader-only manager.Runnable that runs
// with the ReservedCapacity feature gate, lists the NodeClaims labelled
// karpenter.k8s.aws/capacity-reservation-id, describes their reservations
// (DescribeCapacityReservations through the capacityreservation provider
// and its cache, one call per set of ids), and deletes every NodeClaim
// whose reservation is a Capacity Block within
// capacityreservation.ExpiringWindow (40 minutes) of its end: the
// termination controller then drains its Node gracefully, honouring
// PodDisruptionBudgets and the NodeClaim's terminationGracePeriod, and the
// provisioner launches replacements for the evicted pods. The block's
// reserved offering is unavailable from the same moment (the cloud
// provider judges expiry by its clock as well as by the EC2NodeClass
// status), so replacements go to other capacity.
//
// It polls every Interval (1 minute, Karpenter's requeue) and, unlike
// Karpenter, also when a NodeClaim joins a reservation (Handler, on the
// NodeClaim informer) and when the next known block starts expiring, so
// that the drain begins at the 40-minute mark rather than up to a minute
// after it. Each deletion publishes a TerminatingOnInterruption event
// (Karpenter's interruption event reason; its expiration controller
// publishes none) on the NodeClaim and its Node and logs "initiating
// delete for capacity block expiration" with the NodeClaim, Node,
// reservation and end. NodeClaims already being deleted are left alone. A
// failed description changes nothing; the next poll tries again.
package expiration
