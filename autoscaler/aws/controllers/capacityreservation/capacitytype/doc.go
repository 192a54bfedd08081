// Package capacitytype relabels the NodeClaims and Nodes of instances
// whose capacity reservation ended, from capacity type reserved to
// on-demand, as Karpenter v1.14's capacityreservation.capacitytype
// controller does (aws/karpenter-provider-aws
// pkg/controllers/capacityreservation/capacitytype/controller.go@v1.14.3).
//
// When an on-demand capacity reservation (ODCR) expires or is cancelled,
// EC2 keeps its instances running as plain on-demand instances and drops
// their capacityReservationId (EC2 User Guide, "Cancel a Capacity
// Reservation"; Karpenter's designs/odcr.md). The Controller, a
// leader-only manager.Runnable that runs with the ReservedCapacity feature
// gate, lists the cluster's instances through the cloud provider every
// Interval (1 minute, Karpenter's requeue) and, for each NodeClaim
// labelled karpenter.sh/capacity-type=reserved whose instance EC2 now
// reports on-demand, sets the label to on-demand and removes
// karpenter.k8s.aws/capacity-reservation-id and
// karpenter.k8s.aws/capacity-reservation-type, on the NodeClaim and on its
// registered Node (karpenter.sh/registered=true). Scheduling and
// consolidation then price the node as on-demand, and the node is not
// drifted for it (CapacityReservationDrift keys on the instance's
// reservation, which is gone). NodeClaims being deleted are left alone;
// only reserved → on-demand is done, as in Karpenter. Each update is
// logged (V(1), "updated capacity type for nodeclaims") with the
// NodeClaim names. A failed listing changes nothing; the next poll tries
// again.
package capacitytype
