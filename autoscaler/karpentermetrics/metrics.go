package karpentermetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"
)

// Label keys and values, as Karpenter v1.13.0 defines them
// (sigs.k8s.io/karpenter pkg/metrics/constants.go and
// pkg/cloudprovider/metrics/cloudprovider.go).
const (
	// LabelNodePool is the owning NodePool's name (karpenter.sh/nodepool).
	LabelNodePool = kmetrics.NodePoolLabel // "nodepool"
	// LabelReason is why a NodeClaim was created or disrupted.
	LabelReason = kmetrics.ReasonLabel // "reason"
	// LabelCapacityType is "on-demand" or "spot" (karpenter.sh/capacity-type).
	LabelCapacityType = kmetrics.CapacityTypeLabel // "capacity_type"
	// LabelMinValuesRelaxed is "true" when the NodeClaim was created with
	// relaxed minValues, else "false".
	LabelMinValuesRelaxed = kmetrics.MinValuesRelaxedLabel // "min_values_relaxed"
	// LabelResourceType is a resource name lower-cased with "-" turned
	// into "_" ("cpu", "memory", "nodes", "nvidia.com/gpu").
	LabelResourceType = kmetrics.ResourceTypeLabel // "resource_type"
	// LabelController names the controller that made a call or ran a
	// scheduling simulation ("provisioner", "disruption", ...).
	LabelController = "controller"
	// LabelMethod is a CloudProvider method: Create, Delete, Get, List,
	// GetInstanceTypes, IsDrifted.
	LabelMethod = "method"
	// LabelProvider is the cloud provider's name ("aws").
	LabelProvider = "provider"
	// LabelError is a well-known CloudProvider error type name, "" for any other error.
	LabelError = "error"

	// ReasonProvisioned is the created_total reason of NodeClaims the
	// provisioner creates for pending pods (Karpenter's ProvisionedReason).
	ReasonProvisioned = kmetrics.ProvisionedReason // "provisioned"
)

// Reasons of karpenter_nodeclaims_disrupted_total that no disruption
// method names, with Karpenter v1.13.0's values once snake-cased by
// NodeClaimDisrupted. Interruption deletions are counted with the message
// kind ("spot_interrupted", "scheduled_change", "instance_stopped",
// "instance_terminated"), as aws/karpenter-provider-aws's interruption
// controller counts them.
const (
	// ReasonInsufficientCapacity: the launch found no capacity and the
	// NodeClaim was deleted (pkg/controllers/nodeclaim/lifecycle/launch.go).
	ReasonInsufficientCapacity = "InsufficientCapacity" // "insufficient_capacity"
	// ReasonGarbageCollected: the NodeClaim's instance is gone
	// (pkg/controllers/nodeclaim/garbagecollection/controller.go).
	ReasonGarbageCollected = "GarbageCollected" // "garbage_collected"
	// ReasonRegistrationTimeout: no Node registered within the
	// registration TTL (pkg/controllers/nodeclaim/lifecycle/liveness.go).
	ReasonRegistrationTimeout = "RegistrationTimeout" // "registration_timeout"
	// ReasonLaunchTimeout: no instance was launched within the launch TTL
	// (pkg/controllers/nodeclaim/lifecycle/liveness.go).
	ReasonLaunchTimeout = "LaunchTimeout" // "launch_timeout"
)

// Controller names, as Karpenter v1.13.0 names the controllers doing the
// same job (their Name() methods); they are the values of LabelController.
const (
	ControllerProvisioner        = "provisioner"
	ControllerDisruption         = "disruption"
	ControllerNodeClaimLifecycle = "nodeclaim.lifecycle"
	ControllerNodeTermination    = "node.termination"
	ControllerGarbageCollection  = "nodeclaim.garbagecollection"
)

// NodeClaim counters: Karpenter's own definitions, registered on
// controller-runtime's registry when sigs.k8s.io/karpenter/pkg/metrics is
// initialised.
var (
	// NodeClaimsCreatedTotal is karpenter_nodeclaims_created_total{reason,
	// nodepool,min_values_relaxed}: NodeClaims created (count). Source:
	// sigs.k8s.io/karpenter v1.13.0 pkg/metrics/metrics.go.
	NodeClaimsCreatedTotal = kmetrics.NodeClaimsCreatedTotal
	// NodeClaimsTerminatedTotal is karpenter_nodeclaims_terminated_total{
	// nodepool,capacity_type}: NodeClaims whose termination finished
	// (count). Source: pkg/metrics/metrics.go.
	NodeClaimsTerminatedTotal = kmetrics.NodeClaimsTerminatedTotal
	// NodeClaimsDisruptedTotal is karpenter_nodeclaims_disrupted_total{
	// reason,nodepool,capacity_type}: NodeClaims disrupted (count). Source:
	// pkg/metrics/metrics.go.
	NodeClaimsDisruptedTotal = kmetrics.NodeClaimsDisruptedTotal
)

// Families redefined from Karpenter controller packages.
var (
	// PodStartupDurationSeconds is karpenter_pods_startup_duration_seconds:
	// a summary (quantiles 0, 0.5, 0.9, 0.99, 1, error 0.01) of the time in
	// seconds from a pod's creation to its Ready condition turning True,
	// observed once per pod seen pending. No labels. Source:
	// sigs.k8s.io/karpenter v1.13.0 pkg/controllers/metrics/pod/controller.go.
	PodStartupDurationSeconds = prometheus.NewSummary(prometheus.SummaryOpts{
		Namespace: kmetrics.Namespace, Subsystem: kmetrics.PodSubsystem, Name: "startup_duration_seconds",
		Help:       "The time from pod creation until the pod is running.",
		Objectives: kmetrics.SummaryObjectives(),
	})

	// SchedulingDurationSeconds is karpenter_scheduler_scheduling_duration_seconds{controller}:
	// a histogram (Karpenter's DurationBuckets, 5 ms to 600 s) of the
	// seconds one scheduling simulation took, by controller ("provisioner"
	// or "disruption"). Source: pkg/controllers/provisioning/scheduling/metrics.go.
	SchedulingDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: kmetrics.Namespace, Subsystem: "scheduler", Name: "scheduling_duration_seconds",
		Help:    "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
		Buckets: kmetrics.DurationBuckets(),
	}, []string{LabelController})

	// ProvisionerSchedulingDurationSeconds is
	// karpenter_provisioner_scheduling_duration_seconds{controller}: the
	// same observations as SchedulingDurationSeconds under the name
	// Karpenter used before v1 (Karpenter v1.13.0 exports only
	// karpenter_scheduler_scheduling_duration_seconds), so older
	// dashboards keep working. Seconds, Karpenter's DurationBuckets.
	ProvisionerSchedulingDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: kmetrics.Namespace, Subsystem: "provisioner", Name: "scheduling_duration_seconds",
		Help:    "Duration of scheduling simulations used for deprovisioning and provisioning in seconds. Pre-v1 name of karpenter_scheduler_scheduling_duration_seconds.",
		Buckets: kmetrics.DurationBuckets(),
	}, []string{LabelController})

	// CloudProviderDurationSeconds is karpenter_cloudprovider_duration_seconds{
	// controller,method,provider}: a histogram (Prometheus default buckets,
	// as Karpenter sets none) of the seconds each CloudProvider call took.
	// Source: sigs.k8s.io/karpenter v1.13.0 pkg/cloudprovider/metrics/cloudprovider.go.
	CloudProviderDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: kmetrics.Namespace, Subsystem: "cloudprovider", Name: "duration_seconds",
		Help: "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
	}, []string{LabelController, LabelMethod, LabelProvider})

	// CloudProviderErrorsTotal is karpenter_cloudprovider_errors_total{
	// controller,method,provider,error}: CloudProvider calls that returned
	// an error (count); error is InsufficientCapacityError,
	// NodeClaimNotFoundError, NodeClassNotReadyError or "". Source:
	// pkg/cloudprovider/metrics/cloudprovider.go.
	CloudProviderErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: kmetrics.Namespace, Subsystem: "cloudprovider", Name: "errors_total",
		Help: "Total number of errors returned from CloudProvider calls.",
	}, []string{LabelController, LabelMethod, LabelProvider, LabelError})
)

// Names of the families the state collector (Register) reports at scrape
// time, with Karpenter v1.13.0's help texts.
const (
	// MetricNodePoolUsage is karpenter_nodepools_usage{resource_type,nodepool}:
	// the NodePool's status.resources (cpu in cores, memory and storage in
	// bytes, other resources in units). Source:
	// pkg/controllers/metrics/nodepool/controller.go.
	MetricNodePoolUsage = "karpenter_nodepools_usage"
	// MetricNodePoolLimit is karpenter_nodepools_limit{resource_type,nodepool}:
	// the NodePool's spec.limits, in the same units as MetricNodePoolUsage.
	// Source: pkg/controllers/metrics/nodepool/controller.go.
	MetricNodePoolLimit = "karpenter_nodepools_limit"
	// MetricClusterStateSynced is karpenter_cluster_state_synced: 1 once
	// the controller's Node and NodeClaim caches have synced with the API
	// server, else 0. Source: pkg/controllers/state/metrics.go.
	MetricClusterStateSynced = "karpenter_cluster_state_synced"
	// MetricClusterStateNodeCount is karpenter_cluster_state_node_count: the
	// number of nodes in cluster state, a Node and its NodeClaim (same
	// providerID) counting once, a NodeClaim not yet registered counting
	// too. Source: pkg/controllers/state/metrics.go.
	MetricClusterStateNodeCount = "karpenter_cluster_state_node_count"
	// MetricNodeClaims is karpx_nodeclaims{nodepool,phase}: the number of
	// NodeClaims of each NodePool in each phase (NodeClaimPhase), 0 for a
	// phase the NodePool has no NodeClaim in. karpx
	// only: Karpenter v1.13.0 reports NodeClaim conditions per object
	// (operator_nodeclaim_status_condition_count), which karpx does not.
	MetricNodeClaims = "karpx_nodeclaims"
)

var (
	nodePoolUsageDesc = prometheus.NewDesc(MetricNodePoolUsage,
		"The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
		[]string{LabelResourceType, LabelNodePool}, nil)
	nodePoolLimitDesc = prometheus.NewDesc(MetricNodePoolLimit,
		"Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
		[]string{LabelResourceType, LabelNodePool}, nil)
	clusterStateSyncedDesc = prometheus.NewDesc(MetricClusterStateSynced,
		"Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state",
		nil, nil)
	clusterStateNodeCountDesc = prometheus.NewDesc(MetricClusterStateNodeCount,
		"Current count of nodes in cluster state", nil, nil)
	nodeClaimsDesc = prometheus.NewDesc(MetricNodeClaims,
		"NodeClaims by NodePool and lifecycle phase (Pending, Launched, Registered, Initialized, Terminating).",
		[]string{LabelNodePool, "phase"}, nil)
)

func init() {
	crmetrics.Registry.MustRegister(PodStartupDurationSeconds, SchedulingDurationSeconds,
		ProvisionerSchedulingDurationSeconds, CloudProviderDurationSeconds, CloudProviderErrorsTotal)
}
