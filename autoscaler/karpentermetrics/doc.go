// Package karpentermetrics exports the karpenter_* Prometheus metrics of
// Karpenter v1.14.0 (core and AWS provider) that karpx has a counterpart
// for, with Karpenter's names, types, label keys, label value
// vocabularies, units and buckets, so that dashboards and alerts written
// for Karpenter work unchanged against karpx. Metrics only karpx has keep
// their karpx_* names in their own packages.
//
// NodeClaim counters (karpenter_nodeclaims_{created,terminated,disrupted}_total)
// and karpenter_nodes_terminated_total are Karpenter's own definitions
// from sigs.k8s.io/karpenter/pkg/metrics at the version go.mod requires,
// v1.13.0 (that package imports nothing but the Prometheus client,
// operatorpkg and controller-runtime's registry); v1.14.0 added a zone
// label to the terminated counters, which these lack. Every other family
// lives in a Karpenter controller package that cannot be imported without
// its controller, so it is redefined here with a comment naming the
// source file (node repair's karpenter_nodeclaims_unhealthy_disrupted_total
// is Karpenter v1.14.0's).
//
// Controllers record through the functions of this package
// (NodeClaimCreated, NodeClaimTerminated, NodeClaimDisrupted,
// NodeClaimRepaired, ObserveScheduling; for node termination NodeDrained, NodeTerminated,
// EvictionRequest, PodsDrained) and a Decorate-d CloudProvider (whose
// GetInstanceTypes answers also set the karpenter_cloudprovider_instance_type_*
// gauges); Register adds the families that are read from the manager's
// cache at each scrape (NodePool usage and limits, cluster state, the
// per-node karpenter_nodes_* gauges and karpenter_cluster_utilization_percent,
// karpenter_pods_state and the pods' unstarted and unbound times) and
// those observed from the pod informer (pod startup and bound durations). docs/metrics.md lists
// every Karpenter v1.14 family, exported or why not;
// TestEveryKarpenterMetricFamilyListed keeps that list complete.
package karpentermetrics
