package karpentermetrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"
)

// Names of the per-pod families the state collector reports at each
// scrape, as Karpenter v1.14.0 defines them
// (sigs.k8s.io/karpenter@v1.14.0 pkg/controllers/metrics/pod/controller.go).
const (
	// MetricPodState is karpenter_pods_state{name,namespace,owner,node,
	// scheduled,nodepool,zone,arch,capacity_type,instance_type,phase,ready,managed}:
	// 1 for every pod in the cache. owner is the first owner reference as
	// a self link ("/apis/apps/v1/namespaces/default/replicasets/web-5d4",
	// "" without one); node the pod's spec.nodeName; scheduled "true" when
	// it has one; nodepool, zone, arch, capacity_type and instance_type
	// the Node's labels (karpenter.sh/nodepool, topology.kubernetes.io/zone,
	// kubernetes.io/arch, karpenter.sh/capacity-type,
	// node.kubernetes.io/instance-type; "" when unbound or the Node is not
	// cached); phase the pod's status.phase; ready "true" when its Ready
	// condition is True; managed "true" when the Node has a
	// karpenter.sh/nodepool label.
	MetricPodState = "karpenter_pods_state"
	// MetricPodUnstartedTimeSeconds is karpenter_pods_unstarted_time_seconds{name,namespace}:
	// seconds since the creation of each pod that is Pending, or that a
	// previous scrape saw Pending and is neither Ready nor terminal
	// (Succeeded or Failed) since.
	MetricPodUnstartedTimeSeconds = "karpenter_pods_unstarted_time_seconds"
	// MetricPodUnboundTimeSeconds is karpenter_pods_unbound_time_seconds{name,namespace}:
	// seconds since the creation of each Pending pod whose PodScheduled
	// condition is not True.
	MetricPodUnboundTimeSeconds = "karpenter_pods_unbound_time_seconds"
)

// Label keys of karpenter_pods_state besides nodepool, zone,
// capacity_type and instance_type (the well-known ones), as Karpenter
// v1.14.0 names them (pkg/controllers/metrics/pod/controller.go).
const (
	LabelPodName      = "name"
	LabelPodNamespace = "namespace"
	LabelPodOwner     = "owner"
	LabelPodNode      = "node"
	LabelPodScheduled = "scheduled"
	LabelPodArch      = "arch"
	LabelPodPhase     = "phase"
	LabelPodReady     = "ready"
)

var (
	podStateDesc = prometheus.NewDesc(MetricPodState,
		"Pod state is the current state of pods, labelled by pod name, namespace, owner, node, nodepool, zone, architecture, capacity type, instance type, phase and readiness.",
		[]string{LabelPodName, LabelPodNamespace, LabelPodOwner, LabelPodNode, LabelPodScheduled, LabelNodePool,
			"zone", LabelPodArch, LabelCapacityType, "instance_type", LabelPodPhase, LabelPodReady, LabelManaged}, nil)
	podUnstartedDesc = prometheus.NewDesc(MetricPodUnstartedTimeSeconds,
		"The time from pod creation until the pod is running.", []string{LabelPodName, LabelPodNamespace}, nil)
	podUnboundDesc = prometheus.NewDesc(MetricPodUnboundTimeSeconds,
		"The time from pod creation until the pod is bound.", []string{LabelPodName, LabelPodNamespace}, nil)
)

// PodBoundDurationSeconds is karpenter_pods_bound_duration_seconds: a
// histogram (Karpenter's DurationBuckets, 5 ms to 600 s) of the seconds
// from a pod's creation to its PodScheduled condition's
// lastTransitionTime, observed when a pod seen Pending leaves Pending
// scheduled. No labels. Source: sigs.k8s.io/karpenter@v1.14.0
// pkg/controllers/metrics/pod/controller.go.
var PodBoundDurationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Namespace: kmetrics.Namespace, Subsystem: kmetrics.PodSubsystem, Name: "bound_duration_seconds",
	Help:    "The time from pod creation until the pod is bound.",
	Buckets: kmetrics.DurationBuckets(),
})

func init() { crmetrics.Registry.MustRegister(PodBoundDurationSeconds) }

// ObservePodBound records pod in karpenter_pods_bound_duration_seconds
// when this update takes it out of Pending with its PodScheduled
// condition True, as Karpenter v1.14.0's pod metrics controller does for
// a pod it saw Pending.
func ObservePodBound(old, pod *corev1.Pod) {
	if old.Status.Phase != corev1.PodPending || pod.Status.Phase == corev1.PodPending {
		return
	}
	if cond := podScheduled(pod); cond != nil && cond.Status == corev1.ConditionTrue {
		PodBoundDurationSeconds.Observe(cond.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
	}
}

func podScheduled(pod *corev1.Pod) *corev1.PodCondition {
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// ownerSelfLink is the self link Karpenter v1.14.0 builds for a pod's
// first owner reference, "" without one.
func ownerSelfLink(pod *corev1.Pod) string {
	if len(pod.OwnerReferences) == 0 {
		return ""
	}
	o := pod.OwnerReferences[0]
	return "/apis/" + o.APIVersion + "/namespaces/" + pod.Namespace + "/" + strings.ToLower(o.Kind) + "s/" + o.Name
}

// collectPods sends karpenter_pods_state for every pod and
// karpenter_pods_unstarted_time_seconds and _unbound_time_seconds for the
// pods they apply to, measured at now; nodes are the cached Nodes by
// name; seenPending the UIDs of pods a previous scrape saw Pending and
// that have not started since. It returns that set for the next scrape.
// pods are read, never changed.
func collectPods(ch chan<- prometheus.Metric, pods []*corev1.Pod, nodes map[string]*corev1.Node, seenPending map[types.UID]bool, now time.Time) map[types.UID]bool {
	next := map[types.UID]bool{}
	for _, pod := range pods {
		var nl map[string]string
		if n := nodes[pod.Spec.NodeName]; pod.Spec.NodeName != "" && n != nil {
			nl = n.Labels
		}
		ready := podReady(pod) != nil
		ch <- prometheus.MustNewConstMetric(podStateDesc, prometheus.GaugeValue, 1,
			pod.Name, pod.Namespace, ownerSelfLink(pod), pod.Spec.NodeName, strconv.FormatBool(pod.Spec.NodeName != ""),
			nl[karpv1.NodePoolLabelKey], nl[corev1.LabelTopologyZone], nl[corev1.LabelArchStable], nl[karpv1.CapacityTypeLabelKey],
			nl[corev1.LabelInstanceTypeStable], string(pod.Status.Phase), strconv.FormatBool(ready),
			strconv.FormatBool(nl[karpv1.NodePoolLabelKey] != ""))
		age := now.Sub(pod.CreationTimestamp.Time).Seconds()
		pending := pod.Status.Phase == corev1.PodPending
		if pending || (seenPending[pod.UID] && !ready && !terminal(pod)) {
			next[pod.UID] = true
			ch <- prometheus.MustNewConstMetric(podUnstartedDesc, prometheus.GaugeValue, age, pod.Name, pod.Namespace)
		}
		if c := podScheduled(pod); pending && (c == nil || c.Status != corev1.ConditionTrue) {
			ch <- prometheus.MustNewConstMetric(podUnboundDesc, prometheus.GaugeValue, age, pod.Name, pod.Namespace)
		}
	}
	return next
}
