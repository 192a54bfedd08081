// Package explain implements `kubectl karpx explain pod NAME`: why a pod
// is pending, and what Karpenter's NodePools would launch for it.
//
// It reads the pod, the NodePools, EC2NodeClasses, NodeClaims and
// DaemonSets (each DaemonSet's template pod built by the autoscaler's own
// clusterstate.DaemonSetTemplatePods, the overhead the provisioner and
// consolidation reserve on a new node), and runs the autoscaler's own scheduling code
// (autoscaler/scheduling.Solve) on them without launching anything: once
// per NodePool, to say which requirement, taint or limit rules each one out
// (or that its EC2NodeClass is missing or not ready), and once with all of
// them, to say which NodePool, instance type and offering (zone, capacity
// type, price) the pod would get.
//
// A NodePool whose node class karpx cannot model (anything but a
// karpenter.k8s.aws EC2NodeClass, such as the KWOKNodeClass of upstream
// Karpenter's kwok provider) is shown as "unknown" rather than ruled out,
// and every explanation carries the autoscalers' own latest events about
// the pod (AutoscalerSources: Karpenter's and karpx's nominations and
// scheduling failures), so a cluster run by upstream Karpenter still gets
// an answer.
//
// The plugin has no EC2 access: instance types and on-demand prices come
// from karpx's built-in catalogue (package catalog), zones from the
// EC2NodeClass's status.subnets (else the cluster's nodes), and every
// offering is assumed available with spot priced at the on-demand price (an
// upper bound). The output says so. Capacity reservations listed in an
// EC2NodeClass's status.capacityReservations are reserved offerings with
// the free places the karpx controller reports (reservationreport), less
// the NodeClaims not launched yet that hold one; the explanation lists
// them and says when one is full.
package explain
