package karpentermetrics

import (
	"errors"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"
)

// Label keys of the termination and build families, as Karpenter v1.14.0
// names them (pkg/controllers/node/termination/terminator/metrics.go,
// pkg/operator/operator.go).
const (
	// LabelCode is the HTTP status code of an eviction request's answer
	// ("200", "429", "404", ...).
	LabelCode = "code"
	// ReasonForcefulTermination is karpenter_pods_drained_total's reason
	// for a pod drained from a node no disruption method chose (deleted by
	// a user, expired, interrupted outside disruption), as Karpenter's
	// evictionReason (terminator/eviction.go@v1.14.0) names it.
	ReasonForcefulTermination = "Forceful Termination"
)

// lifetimeBuckets are karpenter_nodes_lifetime_duration_seconds' bucket
// bounds in seconds: 15, 30 and 45 minutes; 1, 2, 4, 6, 8, 10, 12, 16 and
// 20 hours; 1, 2, 3, 5, 10, 15, 20, 25 and 30 days (Karpenter v1.14.0
// pkg/controllers/node/termination/metrics.go).
func lifetimeBuckets() []float64 {
	var out []float64
	for _, m := range []time.Duration{15, 30, 45} {
		out = append(out, (m * time.Minute).Seconds())
	}
	for _, h := range []time.Duration{1, 2, 4, 6, 8, 10, 12, 16, 20} {
		out = append(out, (h * time.Hour).Seconds())
	}
	for _, d := range []time.Duration{1, 2, 3, 5, 10, 15, 20, 25, 30} {
		out = append(out, (d * 24 * time.Hour).Seconds())
	}
	return out
}

// Families of Karpenter's node termination controller and terminator,
// and its build information, redefined with Karpenter v1.14.0's names,
// types, label keys and buckets.
var (
	// NodesDrainedTotal is karpenter_nodes_drained_total{nodepool}: Nodes
	// whose drain completed (count), once per Node with a NodeClaim.
	// Source: pkg/controllers/node/termination/metrics.go@v1.14.0.
	NodesDrainedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: kmetrics.Namespace, Subsystem: kmetrics.NodeSubsystem, Name: "drained_total",
		Help: "Nodes whose drain completed, by NodePool.",
	}, []string{LabelNodePool})

	// NodesTerminationDurationSeconds is
	// karpenter_nodes_termination_duration_seconds{nodepool}: a summary
	// (Karpenter's objectives 0, 0.5, 0.9, 0.99, 1) of the seconds from a
	// Node's deletion request to the removal of its termination finalizer.
	// Source: pkg/controllers/node/termination/metrics.go@v1.14.0.
	NodesTerminationDurationSeconds = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Namespace: kmetrics.Namespace, Subsystem: kmetrics.NodeSubsystem, Name: "termination_duration_seconds",
		Help:       "Seconds from a Node's deletion request to the removal of its termination finalizer, by NodePool.",
		Objectives: kmetrics.SummaryObjectives(),
	}, []string{LabelNodePool})

	// NodesLifetimeDurationSeconds is
	// karpenter_nodes_lifetime_duration_seconds{nodepool}: a histogram
	// (lifetimeBuckets, 15 minutes to 30 days) of the seconds from a
	// Node's creation to its termination finalizer's removal. Source:
	// pkg/controllers/node/termination/metrics.go@v1.14.0.
	NodesLifetimeDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: kmetrics.Namespace, Subsystem: kmetrics.NodeSubsystem, Name: "lifetime_duration_seconds",
		Help:    "Seconds from a Node's creation to its termination, by NodePool.",
		Buckets: lifetimeBuckets(),
	}, []string{LabelNodePool})

	// PodsEvictionRequestsTotal is karpenter_pods_eviction_requests_total{
	// code}: eviction requests the drain sent, by the HTTP status code of
	// the answer (count). Source: pkg/controllers/node/termination/
	// terminator/metrics.go@v1.14.0.
	PodsEvictionRequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: kmetrics.Namespace, Subsystem: kmetrics.PodSubsystem, Name: "eviction_requests_total",
		Help: "Pod eviction requests sent while draining nodes, by the answer's HTTP status code.",
	}, []string{LabelCode})

	// PodsDrainedTotal is karpenter_pods_drained_total{reason}: pods
	// evicted from draining nodes (count), by the NodeClaim's
	// DisruptionReason (e.g. "Underutilized", "Drifted") or
	// ReasonForcefulTermination. Source: pkg/controllers/node/termination/
	// terminator/metrics.go@v1.14.0.
	PodsDrainedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: kmetrics.Namespace, Subsystem: kmetrics.PodSubsystem, Name: "drained_total",
		Help: "Pods evicted while draining nodes, by the node's disruption reason.",
	}, []string{LabelReason})

	// BuildInfo is karpenter_build_info{version,goversion,goarch,commit}:
	// a constant 1 labelled with the controller binary's module version,
	// Go version, GOARCH and VCS revision (from runtime/debug's build
	// information; "unknown" when absent). Source: pkg/operator/
	// operator.go@v1.14.0.
	BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: kmetrics.Namespace, Name: "build_info",
		Help: "A constant 1 labelled with the version, Go version, architecture and commit karpx was built from.",
	}, []string{"version", "goversion", "goarch", "commit"})
)

func init() {
	crmetrics.Registry.MustRegister(NodesDrainedTotal, NodesTerminationDurationSeconds, NodesLifetimeDurationSeconds,
		PodsEvictionRequestsTotal, PodsDrainedTotal, BuildInfo)
	BuildInfo.WithLabelValues(buildLabels(debug.ReadBuildInfo())).Set(1)
}

// buildLabels returns BuildInfo's label values: the main module's
// version, the Go version, GOARCH and the vcs.revision setting, each
// "unknown" when the binary carries none.
func buildLabels(bi *debug.BuildInfo, ok bool) (version, goVersion, goArch, commit string) {
	version, goVersion, goArch, commit = "unknown", runtime.Version(), runtime.GOARCH, "unknown"
	if !ok || bi == nil {
		return
	}
	if v := bi.Main.Version; v != "" {
		version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			commit = s.Value
		}
	}
	return
}

// NodeDrained records karpenter_nodes_drained_total for node, whose drain
// just completed.
func NodeDrained(node *corev1.Node) {
	NodesDrainedTotal.WithLabelValues(node.Labels[karpv1.NodePoolLabelKey]).Inc()
}

// NodeTerminated records, once node's termination finalizer is removed at
// now: karpenter_nodes_terminated_total (Karpenter's own collector, by
// NodePool), the seconds since its deletion request
// (karpenter_nodes_termination_duration_seconds) and since its creation
// (karpenter_nodes_lifetime_duration_seconds).
func NodeTerminated(node *corev1.Node, deleted, now time.Time) {
	pool := node.Labels[karpv1.NodePoolLabelKey]
	kmetrics.NodesTerminatedTotal.Inc(map[string]string{LabelNodePool: pool})
	NodesTerminationDurationSeconds.WithLabelValues(pool).Observe(now.Sub(deleted).Seconds())
	NodesLifetimeDurationSeconds.WithLabelValues(pool).Observe(now.Sub(node.CreationTimestamp.Time).Seconds())
}

// EvictionRequest records karpenter_pods_eviction_requests_total for one
// eviction request that returned err: code "200" for nil, the status code
// of an API error, nothing for an error without one (the request never got
// an answer), as Karpenter counts them.
func EvictionRequest(err error) {
	if err == nil {
		PodsEvictionRequestsTotal.WithLabelValues("200").Inc()
		return
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		PodsEvictionRequestsTotal.WithLabelValues(strconv.Itoa(int(status.Status().Code))).Inc()
	}
}

// PodsDrained records n pods evicted from the Node of nc (nil: a Node
// without NodeClaim) in karpenter_pods_drained_total, with reason nc's
// DisruptionReason condition's reason when it is True, else
// ReasonForcefulTermination, and "" without a NodeClaim (Karpenter's
// evictionReason, terminator/eviction.go@v1.14.0).
func PodsDrained(nc *karpv1.NodeClaim, n int) {
	if n <= 0 {
		return
	}
	reason := ""
	if nc != nil {
		reason = ReasonForcefulTermination
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason); c.IsTrue() {
			reason = c.Reason
		}
	}
	PodsDrainedTotal.WithLabelValues(reason).Add(float64(n))
}
