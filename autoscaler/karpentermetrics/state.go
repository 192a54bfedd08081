package karpentermetrics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/state/podcache"
)

// Register adds to mgr what reports the families read from the API
// server: karpenter_nodepools_usage and _limit, karpenter_cluster_state_synced
// and _node_count, the per-node families (karpenter_nodes_allocatable,
// _total_pod_requests, ...) and karpenter_cluster_utilization_percent
// (computed from the manager's cache at each scrape, pods read as
// pointers from the informer store) and
// karpenter_pods_startup_duration_seconds (from the pod informer). A
// second Register in the same process (tests run several managers)
// replaces the previous state collector. It returns the informer's error.
func Register(ctx context.Context, mgr manager.Manager) error {
	reader, err := podcache.New(ctx, mgr.GetClient(), mgr.GetCache())
	if err != nil {
		return err
	}
	c := &StateCollector{Reader: reader}
	if err := mgr.Add(syncWatcher(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			c.Synced.Store(true)
		}
		<-ctx.Done()
		c.Synced.Store(false)
		return nil
	})); err != nil {
		return err
	}
	if err := crmetrics.Registry.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
		crmetrics.Registry.Unregister(are.ExistingCollector)
		if err := crmetrics.Registry.Register(c); err != nil {
			return err
		}
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		old, ok1 := oldObj.(*corev1.Pod)
		pod, ok2 := newObj.(*corev1.Pod)
		if ok1 && ok2 {
			ObservePodStartup(old, pod)
			ObservePodBound(old, pod)
		}
	}})
	return err
}

// syncWatcher runs on every replica, leader or not: every replica's cache
// syncs, and a standby reporting synced 0 would fire alerts.
type syncWatcher func(context.Context) error

func (f syncWatcher) Start(ctx context.Context) error { return f(ctx) }
func (syncWatcher) NeedLeaderElection() bool          { return false }

// ObservePodStartup records pod in karpenter_pods_startup_duration_seconds
// when this update is the one that makes it Ready after it was seen
// Pending and not Ready: the seconds from its creation to its Ready
// condition's lastTransitionTime, as Karpenter v1.13.0's pod metrics
// controller measures (pkg/controllers/metrics/pod/controller.go).
func ObservePodStartup(old, pod *corev1.Pod) {
	if old.Status.Phase != corev1.PodPending || podReady(old) != nil {
		return
	}
	if cond := podReady(pod); cond != nil {
		PodStartupDurationSeconds.Observe(cond.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
	}
}

func podReady(pod *corev1.Pod) *corev1.PodCondition {
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// StateCollector is a prometheus.Collector that reports, at each scrape,
// karpenter_cluster_state_synced, and once synced
// karpenter_cluster_state_node_count, karpenter_nodepools_usage and
// _limit, karpx_nodeclaims, the per-node families (collectNodes),
// karpenter_cluster_utilization_percent, karpenter_pods_state and the
// pods' unstarted and unbound times (collectPods), read from Reader (the manager's
// cache: no API request).
type StateCollector struct {
	// Reader lists NodePools, NodeClaims, Nodes and Pods; when it is a
	// podcache.Lister the pods are read as pointers to the informer
	// store's objects, without copying them.
	Reader client.Reader
	// Clock is the time node lifetimes are measured to; nil is the real clock.
	Clock clock.PassiveClock
	// Synced is true once Reader's caches have synced.
	Synced atomic.Bool

	// mu guards seenPending, the UIDs of pods the last scrape saw Pending
	// and not started since (karpenter_pods_unstarted_time_seconds).
	mu          sync.Mutex
	seenPending map[types.UID]bool
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodePoolUsageDesc
	ch <- nodePoolLimitDesc
	ch <- clusterStateSyncedDesc
	ch <- clusterStateNodeCountDesc
	ch <- nodeClaimsDesc
	for _, d := range []*prometheus.Desc{nodeAllocatableDesc, nodeTotalPodRequestsDesc, nodeTotalPodLimitsDesc,
		nodeTotalDaemonRequestsDesc, nodeTotalDaemonLimitsDesc, nodeSystemOverheadDesc, nodeCurrentLifetimeDesc, clusterUtilizationDesc,
		podStateDesc, podUnstartedDesc, podUnboundDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A failed list reports synced 0
// and leaves the other families out of this scrape.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.Synced.Load() {
		ch <- prometheus.MustNewConstMetric(clusterStateSyncedDesc, prometheus.GaugeValue, 0)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pools karpv1.NodePoolList
	var claims karpv1.NodeClaimList
	var nodes corev1.NodeList
	if c.Reader.List(ctx, &pools) != nil || c.Reader.List(ctx, &claims) != nil || c.Reader.List(ctx, &nodes) != nil {
		ch <- prometheus.MustNewConstMetric(clusterStateSyncedDesc, prometheus.GaugeValue, 0)
		return
	}
	pods, err := podcache.List(ctx, c.Reader)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(clusterStateSyncedDesc, prometheus.GaugeValue, 0)
		return
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if c.Clock != nil {
		clk = c.Clock
	}
	managed := make(map[string]bool, len(claims.Items))
	for i := range claims.Items {
		if id := claims.Items[i].Status.ProviderID; id != "" {
			managed[id] = true
		}
	}
	now := clk.Now()
	collectNodes(ch, nodes.Items, pods, managed, now)
	byName := make(map[string]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	c.mu.Lock()
	c.seenPending = collectPods(ch, pods, byName, c.seenPending, now)
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(clusterStateSyncedDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(clusterStateNodeCountDesc, prometheus.GaugeValue, float64(NodeCount(claims.Items, nodes.Items)))
	type poolPhase struct{ pool, phase string }
	phases := map[poolPhase]int{}
	for i := range pools.Items {
		for _, phase := range nodeClaimPhases {
			phases[poolPhase{pools.Items[i].Name, phase}] = 0
		}
	}
	for i := range claims.Items {
		phases[poolPhase{claims.Items[i].Labels[karpv1.NodePoolLabelKey], NodeClaimPhase(&claims.Items[i])}]++
	}
	for k, n := range phases {
		ch <- prometheus.MustNewConstMetric(nodeClaimsDesc, prometheus.GaugeValue, float64(n), k.pool, k.phase)
	}
	for i := range pools.Items {
		np := &pools.Items[i]
		for name, q := range np.Status.Resources {
			ch <- prometheus.MustNewConstMetric(nodePoolUsageDesc, prometheus.GaugeValue, ResourceValue(name, q), ResourceType(name), np.Name)
		}
		for name, q := range np.Spec.Limits {
			ch <- prometheus.MustNewConstMetric(nodePoolLimitDesc, prometheus.GaugeValue, ResourceValue(name, q), ResourceType(name), np.Name)
		}
	}
}

// NodeCount is the number of nodes in cluster state as Karpenter counts
// them (pkg/controllers/state/cluster.go: one state node per providerID):
// a Node and the NodeClaim with its providerID count once; a NodeClaim not
// yet launched (no providerID) counts once; a Node without providerID
// counts once.
func NodeCount(claims []karpv1.NodeClaim, nodes []corev1.Node) int {
	ids := map[string]bool{}
	n := 0
	for i := range claims {
		if id := claims[i].Status.ProviderID; id == "" {
			n++
		} else {
			ids[id] = true
		}
	}
	for i := range nodes {
		if id := nodes[i].Spec.ProviderID; id == "" {
			n++
		} else {
			ids[id] = true
		}
	}
	return n + len(ids)
}

// ResourceType is the resource_type label of a resource name, as
// Karpenter v1.13.0 writes it (pkg/controllers/metrics/nodepool/controller.go):
// lower-cased, "-" replaced by "_" ("ephemeral-storage" → "ephemeral_storage").
func ResourceType(name corev1.ResourceName) string {
	return strings.ReplaceAll(strings.ToLower(string(name)), "-", "_")
}

// ResourceValue is the gauge value of a quantity as Karpenter v1.13.0
// reports it: cpu in cores (fractional), everything else in its base unit
// (memory and storage in bytes, pods and nodes as counts).
func ResourceValue(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}

// NodeClaim phases, the phase label of karpx_nodeclaims: how far a
// NodeClaim has come in its lifecycle (the PHASE column of `kubectl karpx
// status` uses the same words).
const (
	// PhasePending: not Launched yet (the instance is being created, or
	// creating it failed and is retried).
	PhasePending = "Pending"
	// PhaseLaunched: the instance exists; its Node has not registered.
	PhaseLaunched = "Launched"
	// PhaseRegistered: the Node joined; it is not initialized yet.
	PhaseRegistered = "Registered"
	// PhaseInitialized: the Node is ready for pods.
	PhaseInitialized = "Initialized"
	// PhaseTerminating: the NodeClaim is being deleted.
	PhaseTerminating = "Terminating"
)

// nodeClaimPhases are the phases in lifecycle order; every NodePool
// reports each of them (0 when it has no NodeClaim in it), so that a
// dashboard's series do not vanish when a NodePool scales to zero.
var nodeClaimPhases = []string{PhasePending, PhaseLaunched, PhaseRegistered, PhaseInitialized, PhaseTerminating}

// NodeClaimPhase returns nc's phase: PhaseTerminating once it is being
// deleted, else the last of Launched, Registered and Initialized whose
// condition is True after all those before it, else PhasePending.
func NodeClaimPhase(nc *karpv1.NodeClaim) string {
	if !nc.DeletionTimestamp.IsZero() {
		return PhaseTerminating
	}
	phase := PhasePending
	for _, step := range [...]struct{ condition, phase string }{
		{karpv1.ConditionTypeLaunched, PhaseLaunched},
		{karpv1.ConditionTypeRegistered, PhaseRegistered},
		{karpv1.ConditionTypeInitialized, PhaseInitialized},
	} {
		if !nc.StatusConditions().Get(step.condition).IsTrue() {
			return phase
		}
		phase = step.phase
	}
	return phase
}
