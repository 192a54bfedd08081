package karpentermetrics

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"
)

// Names of the per-node families the state collector reports at each
// scrape, as Karpenter v1.14.0 defines them
// (sigs.k8s.io/karpenter@v1.14.0 pkg/controllers/metrics/node/controller.go).
// Each per-node series carries NodeLabelNames (plus resource_type for the
// resource families). Values: cpu in cores (fractional), memory and
// ephemeral storage in bytes, pods and extended resources as counts.
const (
	// MetricNodeAllocatable is karpenter_nodes_allocatable: the Node's
	// status.allocatable.
	MetricNodeAllocatable = "karpenter_nodes_allocatable"
	// MetricNodeTotalPodRequests is karpenter_nodes_total_pod_requests: the
	// sum of the effective requests (k8s.io/component-helpers PodRequests:
	// init containers and sidecars as the scheduler counts them, plus pod
	// overhead) of the non-terminal pods bound to the Node, DaemonSet pods
	// included; resource_type "pods" is their number.
	MetricNodeTotalPodRequests = "karpenter_nodes_total_pod_requests"
	// MetricNodeTotalPodLimits is karpenter_nodes_total_pod_limits: the same
	// pods' limits (PodLimits); "pods" is their number.
	MetricNodeTotalPodLimits = "karpenter_nodes_total_pod_limits"
	// MetricNodeTotalDaemonRequests is karpenter_nodes_total_daemon_requests:
	// the requests of the bound pods owned by a DaemonSet.
	MetricNodeTotalDaemonRequests = "karpenter_nodes_total_daemon_requests"
	// MetricNodeTotalDaemonLimits is karpenter_nodes_total_daemon_limits: the
	// limits of the bound pods owned by a DaemonSet.
	MetricNodeTotalDaemonLimits = "karpenter_nodes_total_daemon_limits"
	// MetricNodeSystemOverhead is karpenter_nodes_system_overhead:
	// status.capacity minus status.allocatable, for each resource in
	// capacity.
	MetricNodeSystemOverhead = "karpenter_nodes_system_overhead"
	// MetricNodeCurrentLifetimeSeconds is karpenter_nodes_current_lifetime_seconds:
	// seconds since the Node's creationTimestamp (no resource_type label).
	MetricNodeCurrentLifetimeSeconds = "karpenter_nodes_current_lifetime_seconds"
	// MetricClusterUtilizationPercent is karpenter_cluster_utilization_percent{resource_type}:
	// 100 × the pod requests of all Nodes over their allocatable, for each
	// resource with a non-zero allocatable sum.
	MetricClusterUtilizationPercent = "karpenter_cluster_utilization_percent"
)

// Label keys of the per-node families besides the well-known ones
// (sigs.k8s.io/karpenter@v1.14.0 pkg/controllers/metrics/node/controller.go).
const (
	// LabelNodeName is the Node's name.
	LabelNodeName = "node_name"
	// LabelNodePhase is the Node's status.phase (deprecated by Kubernetes,
	// usually ""), as Karpenter reports it.
	LabelNodePhase = "phase"
	// LabelManaged is "true" when a NodeClaim has the Node's providerID,
	// else "false" (Karpenter's StateNode.Managed).
	LabelManaged = "managed"
)

// wellKnownNodeLabels are the node label keys whose values the per-node
// families carry: Karpenter v1.14.0's core WellKnownLabels
// (sigs.k8s.io/karpenter@v1.14.0 pkg/apis/v1/labels.go) and those the AWS
// provider adds to it at init (github.com/aws/karpenter-provider-aws@v1.14.3
// pkg/apis/v1/labels.go). karpx does not add the AWS ones to
// karpv1.WellKnownLabels (scheduling reads that set), so they are listed here.
var wellKnownNodeLabels = []string{
	karpv1.NodePoolLabelKey,
	corev1.LabelTopologyZone,
	corev1.LabelTopologyRegion,
	corev1.LabelInstanceTypeStable,
	corev1.LabelArchStable,
	corev1.LabelOSStable,
	karpv1.CapacityTypeLabelKey,
	corev1.LabelWindowsBuild,
	"karpenter.k8s.aws/capacity-reservation-id",
	"karpenter.k8s.aws/capacity-reservation-type",
	"karpenter.k8s.aws/capacity-reservation-interruptible",
	"karpenter.k8s.aws/instance-hypervisor",
	"karpenter.k8s.aws/instance-encryption-in-transit-supported",
	"karpenter.k8s.aws/instance-category",
	"karpenter.k8s.aws/instance-capability-flex",
	"karpenter.k8s.aws/instance-family",
	"karpenter.k8s.aws/instance-generation",
	"karpenter.k8s.aws/instance-size",
	"karpenter.k8s.aws/instance-local-nvme",
	"karpenter.k8s.aws/instance-cpu",
	"karpenter.k8s.aws/instance-cpu-manufacturer",
	"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
	"karpenter.k8s.aws/instance-memory",
	"karpenter.k8s.aws/instance-ebs-bandwidth",
	"karpenter.k8s.aws/instance-network-bandwidth",
	"karpenter.k8s.aws/instance-gpu-name",
	"karpenter.k8s.aws/instance-gpu-manufacturer",
	"karpenter.k8s.aws/instance-gpu-count",
	"karpenter.k8s.aws/instance-gpu-memory",
	"karpenter.k8s.aws/instance-accelerator-name",
	"karpenter.k8s.aws/instance-accelerator-manufacturer",
	"karpenter.k8s.aws/instance-accelerator-count",
	"topology.k8s.aws/zone-id",
	"karpenter.k8s.aws/instance-tenancy",
	"karpenter.k8s.aws/placement-group-id",
	"karpenter.k8s.aws/placement-group-partition",
}

// MetricLabelName is the Prometheus label name Karpenter v1.14.0 derives
// from a well-known node label key (pkg/controllers/metrics/node/controller.go):
// the part after the "/", lower-cased, "-" replaced by "_"
// ("karpenter.k8s.aws/instance-cpu" → "instance_cpu"). A key without
// exactly one "/" has none: it returns "".
func MetricLabelName(key string) string {
	parts := strings.Split(key, "/")
	if len(parts) != 2 {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(parts[1]), "-", "_")
}

// nodeLabel is one well-known label of the per-node families: the node
// label key read and the Prometheus label name written.
type nodeLabel struct{ key, name string }

// nodeLabels are the well-known labels sorted by Prometheus name, and
// NodeLabelNames their names followed by node_name, phase and managed.
var nodeLabels, nodeLabelNames = func() ([]nodeLabel, []string) {
	seen := map[string]bool{}
	var ls []nodeLabel
	for _, k := range wellKnownNodeLabels {
		if n := MetricLabelName(k); n != "" && !seen[n] {
			seen[n] = true
			ls = append(ls, nodeLabel{k, n})
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].name < ls[j].name })
	names := make([]string, 0, len(ls)+3)
	for _, l := range ls {
		names = append(names, l.name)
	}
	return ls, append(names, LabelNodeName, LabelNodePhase, LabelManaged)
}()

// NodeLabelNames returns the label names of karpenter_nodes_current_lifetime_seconds,
// in order: one per well-known node label (Karpenter v1.14.0 core and AWS
// provider, named by MetricLabelName, sorted), then node_name, phase,
// managed. The resource families add resource_type after them. The slice
// is a copy.
func NodeLabelNames() []string { return append([]string(nil), nodeLabelNames...) }

var (
	nodeResourceLabelNames = append(NodeLabelNames(), LabelResourceType)

	nodeAllocatableDesc = prometheus.NewDesc(MetricNodeAllocatable,
		"Node allocatable are the resources allocatable by nodes.", nodeResourceLabelNames, nil)
	nodeTotalPodRequestsDesc = prometheus.NewDesc(MetricNodeTotalPodRequests,
		"Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.", nodeResourceLabelNames, nil)
	nodeTotalPodLimitsDesc = prometheus.NewDesc(MetricNodeTotalPodLimits,
		"Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.", nodeResourceLabelNames, nil)
	nodeTotalDaemonRequestsDesc = prometheus.NewDesc(MetricNodeTotalDaemonRequests,
		"Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.", nodeResourceLabelNames, nil)
	nodeTotalDaemonLimitsDesc = prometheus.NewDesc(MetricNodeTotalDaemonLimits,
		"Node total daemon limits are the resources specified by DaemonSet pod limits.", nodeResourceLabelNames, nil)
	nodeSystemOverheadDesc = prometheus.NewDesc(MetricNodeSystemOverhead,
		"Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.", nodeResourceLabelNames, nil)
	nodeCurrentLifetimeDesc = prometheus.NewDesc(MetricNodeCurrentLifetimeSeconds,
		"Node age in seconds", NodeLabelNames(), nil)
	clusterUtilizationDesc = prometheus.NewDesc(MetricClusterUtilizationPercent,
		"Utilization of allocatable resources by pod requests", []string{kmetrics.ResourceTypeLabel}, nil)
)

// nodeUsage accumulates the requests and limits of the pods bound to one
// Node, as Karpenter v1.14.0's cluster state tracks them per pod
// (pkg/controllers/state/statenode.go, pkg/utils/resources/resources.go).
type nodeUsage struct {
	podRequests, podLimits, daemonRequests, daemonLimits corev1.ResourceList
}

// addTo adds each quantity of from to into, allocating into when nil,
// and returns into.
func addTo(into, from corev1.ResourceList) corev1.ResourceList {
	if into == nil {
		into = make(corev1.ResourceList, len(from))
	}
	for name, q := range from {
		cur := into[name]
		cur.Add(q)
		into[name] = cur
	}
	return into
}

// onePod is the "pods" quantity one pod adds to its requests and limits.
var onePod = *resource.NewQuantity(1, resource.DecimalSI)

// add records pod (bound to this Node, not terminal).
func (u *nodeUsage) add(pod *corev1.Pod) {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true})
	lim := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	req[corev1.ResourcePods], lim[corev1.ResourcePods] = onePod, onePod
	u.podRequests, u.podLimits = addTo(u.podRequests, req), addTo(u.podLimits, lim)
	if ownedByDaemonSet(pod) {
		u.daemonRequests, u.daemonLimits = addTo(u.daemonRequests, req), addTo(u.daemonLimits, lim)
	}
}

func ownedByDaemonSet(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && strings.HasPrefix(o.APIVersion, "apps/") {
			return true
		}
	}
	return false
}

// terminal reports a pod that Karpenter's cluster state no longer counts
// on its node (podutils.IsTerminal: phase Succeeded or Failed).
func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// collectNodes sends the per-node families for nodes, with the pods bound
// to them (pods may hold pods of other nodes and unbound pods; they are
// read, never changed) and managed the providerIDs NodeClaims have, and
// karpenter_cluster_utilization_percent, as Karpenter v1.14.0's node
// metrics controller computes them (pkg/controllers/metrics/node/controller.go),
// lifetimes measured at now.
func collectNodes(ch chan<- prometheus.Metric, nodes []corev1.Node, pods []*corev1.Pod, managed map[string]bool, now time.Time) {
	usage := make(map[string]*nodeUsage, len(nodes))
	for i := range nodes {
		usage[nodes[i].Name] = &nodeUsage{}
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || terminal(pod) {
			continue
		}
		if u := usage[pod.Spec.NodeName]; u != nil {
			u.add(pod)
		}
	}
	var allocatable, requested corev1.ResourceList
	values := make([]string, len(nodeLabelNames))
	resourcePairs := map[corev1.ResourceName]*dto.LabelPair{}
	for i := range nodes {
		n := &nodes[i]
		for j, l := range nodeLabels {
			values[j] = n.Labels[l.key]
		}
		k := len(nodeLabels)
		values[k], values[k+1] = n.Name, string(n.Status.Phase)
		values[k+2] = strconv.FormatBool(n.Spec.ProviderID != "" && managed[n.Spec.ProviderID])
		// The node's label pairs, sorted by name, are built once and shared
		// by its series: about 40 pairs per series is what a scrape at
		// 2,000 nodes spends most of its allocations on otherwise.
		base := prometheus.MakeLabelPairs(nodeCurrentLifetimeDesc, values)
		u := usage[n.Name]
		for _, f := range [...]struct {
			desc *prometheus.Desc
			list corev1.ResourceList
		}{
			{nodeSystemOverheadDesc, overhead(n.Status.Capacity, n.Status.Allocatable)},
			{nodeTotalPodRequestsDesc, u.podRequests},
			{nodeTotalPodLimitsDesc, u.podLimits},
			{nodeTotalDaemonRequestsDesc, u.daemonRequests},
			{nodeTotalDaemonLimitsDesc, u.daemonLimits},
			{nodeAllocatableDesc, n.Status.Allocatable},
		} {
			for name, q := range f.list {
				rt := resourcePairs[name]
				if rt == nil {
					rt = &dto.LabelPair{Name: proto.String(LabelResourceType), Value: proto.String(ResourceType(name))}
					resourcePairs[name] = rt
				}
				pairs := make([]*dto.LabelPair, 0, len(base)+1)
				pairs = append(append(append(pairs, base[:resourceTypeIndex]...), rt), base[resourceTypeIndex:]...)
				ch <- &sharedLabelGauge{desc: f.desc, labels: pairs, value: ResourceValue(name, q)}
			}
		}
		ch <- &sharedLabelGauge{desc: nodeCurrentLifetimeDesc, labels: base, value: now.Sub(n.CreationTimestamp.Time).Seconds()}
		allocatable = addTo(allocatable, n.Status.Allocatable)
		requested = addTo(requested, u.podRequests)
	}
	for name, a := range allocatable {
		if a.Value() == 0 {
			continue
		}
		r := requested[name]
		pct := 100 * float64(r.Value()) / float64(a.Value())
		if name == corev1.ResourceCPU {
			pct = 100 * float64(r.MilliValue()) / float64(a.MilliValue())
		}
		ch <- prometheus.MustNewConstMetric(clusterUtilizationDesc, prometheus.GaugeValue, pct, ResourceType(name))
	}
}

// resourceTypeIndex is where resource_type goes among the per-node label
// names sorted (the order of a series' label pairs).
var resourceTypeIndex = sort.SearchStrings(slices.Sorted(slices.Values(nodeLabelNames)), LabelResourceType)

// sharedLabelGauge is a gauge sample whose label pairs (sorted by name,
// matching desc's variable labels) may be shared with other samples of
// the same scrape; neither it nor they are changed once sent.
type sharedLabelGauge struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	value  float64
}

// Desc implements prometheus.Metric.
func (g *sharedLabelGauge) Desc() *prometheus.Desc { return g.desc }

// Write implements prometheus.Metric.
func (g *sharedLabelGauge) Write(m *dto.Metric) error {
	m.Label = g.labels
	m.Gauge = &dto.Gauge{Value: proto.Float64(g.value)}
	return nil
}

// overhead is capacity minus allocatable for each resource in capacity
// (Karpenter's resources.Subtract: a resource missing from allocatable
// counts as 0).
func overhead(capacity, allocatable corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(capacity))
	for name, c := range capacity {
		c = c.DeepCopy()
		c.Sub(allocatable[name])
		out[name] = c
	}
	return out
}
