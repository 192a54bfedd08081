package karpentermetrics

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func boundPod(name, node string, req, lim corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// gathered is every series of the named family, keyed by its label
// values node_name and resource_type ("n1/cpu"; "/cpu" without a node),
// with its full label set.
func gathered(t *testing.T, reg *prometheus.Registry, name string) (map[string]float64, map[string]map[string]string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals, labels := map[string]float64{}, map[string]map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ls := map[string]string{}
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = lp.GetValue()
			}
			key := ls[LabelNodeName] + "/" + ls[LabelResourceType]
			vals[key], labels[key] = m.GetGauge().GetValue(), ls
		}
	}
	return vals, labels
}

func TestMetricLabelNameAsKarpenter(t *testing.T) {
	for key, want := range map[string]string{
		"karpenter.sh/nodepool":                                    "nodepool",
		"topology.kubernetes.io/zone":                              "zone",
		"node.kubernetes.io/instance-type":                         "instance_type",
		"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "instance_cpu_sustained_clock_speed_mhz",
		"topology.k8s.aws/zone-id":                                 "zone_id",
		"node.kubernetes.io/windows-build":                         "windows_build",
		"no-slash":                                                 "",
		"a/b/c":                                                    "",
	} {
		if got := MetricLabelName(key); got != want {
			t.Errorf("MetricLabelName(%q) = %q, want %q", key, got, want)
		}
	}
	names := NodeLabelNames()
	if n := len(names); n != len(wellKnownNodeLabels)+3 {
		t.Errorf("%d label names for %d well-known labels; want one each plus node_name, phase, managed", n, len(wellKnownNodeLabels))
	}
	for _, want := range []string{"nodepool", "zone", "region", "instance_type", "arch", "os", "capacity_type", "instance_family", "zone_id", "node_name", "phase", "managed"} {
		if !slices.Contains(names, want) {
			t.Errorf("NodeLabelNames() lacks %q: %v", want, names)
		}
	}
}

func TestNodeGauges(t *testing.T) {
	created := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(created.Add(90 * time.Second))
	n1 := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{
			karpv1.NodePoolLabelKey: "default", corev1.LabelTopologyZone: "us-east-1a", corev1.LabelInstanceTypeStable: "m5.large",
			karpv1.CapacityTypeLabelKey: "spot", "karpenter.k8s.aws/instance-family": "m5", "topology.k8s.aws/zone-id": "use1-az1",
			"team": "not-well-known"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"},
		Status: corev1.NodeStatus{
			Capacity:    rl("cpu", "2", "memory", "8Gi", "pods", "29"),
			Allocatable: rl("cpu", "1930m", "memory", "7Gi", "pods", "29")},
	}
	n2 := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n2", CreationTimestamp: metav1.NewTime(created.Add(-time.Hour))},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1b/i-2"},
		Status:     corev1.NodeStatus{Allocatable: rl("cpu", "4", "pods", "110")},
	}
	nc := claim("c1", "default", "spot")
	nc.Status.ProviderID = "aws:///us-east-1a/i-1"
	app := boundPod("app", "n1", rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "1", "memory", "2Gi"))
	// An init container asking more than the app containers: the pod's
	// effective cpu request is the init container's 1 core.
	app.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}
	ds := boundPod("ds", "n1", rl("cpu", "100m", "memory", "100Mi"), rl("memory", "200Mi"))
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u"}}
	done := boundPod("done", "n1", rl("cpu", "1"), nil)
	done.Status.Phase = corev1.PodSucceeded
	pending := boundPod("pending", "", rl("cpu", "8"), nil)
	pending.Status.Phase = corev1.PodPending

	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(n1, n2, nc, app, ds, done, pending).Build()
	c := &StateCollector{Reader: kube, Clock: clk}
	c.Synced.Store(true)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	const gi, mi = 1 << 30, 1 << 20
	for _, tc := range []struct {
		name string
		want map[string]float64
	}{
		{MetricNodeAllocatable, map[string]float64{"n1/cpu": 1.93, "n1/memory": 7 * gi, "n1/pods": 29, "n2/cpu": 4, "n2/pods": 110}},
		{MetricNodeSystemOverhead, map[string]float64{"n1/cpu": 0.07, "n1/memory": gi, "n1/pods": 0}},
		// app (cpu 1 from its init container, 1Gi) + ds (100m, 100Mi); done
		// (terminal) and pending (unbound) do not count; n2 has no pods, so no series.
		{MetricNodeTotalPodRequests, map[string]float64{"n1/cpu": 1.1, "n1/memory": gi + 100*mi, "n1/pods": 2}},
		{MetricNodeTotalPodLimits, map[string]float64{"n1/cpu": 1, "n1/memory": 2*gi + 200*mi, "n1/pods": 2}},
		{MetricNodeTotalDaemonRequests, map[string]float64{"n1/cpu": 0.1, "n1/memory": 100 * mi, "n1/pods": 1}},
		{MetricNodeTotalDaemonLimits, map[string]float64{"n1/memory": 200 * mi, "n1/pods": 1}},
		{MetricNodeCurrentLifetimeSeconds, map[string]float64{"n1/": 90, "n2/": 3690}},
		{MetricClusterUtilizationPercent, map[string]float64{
			"/cpu": 100 * 1100.0 / 5930, "/memory": 100 * float64(gi+100*mi) / (7 * gi), "/pods": 100 * 2.0 / 139}},
	} {
		got, _ := gathered(t, reg, tc.name)
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}

	_, labels := gathered(t, reg, MetricNodeAllocatable)
	want := map[string]string{}
	for _, n := range NodeLabelNames() {
		want[n] = ""
	}
	maps.Copy(want, map[string]string{"nodepool": "default", "zone": "us-east-1a", "instance_type": "m5.large", "capacity_type": "spot",
		"instance_family": "m5", "zone_id": "use1-az1", "node_name": "n1", "phase": "", "managed": "true", "resource_type": "cpu"})
	if got := labels["n1/cpu"]; !maps.Equal(got, want) {
		t.Errorf("labels of n1's allocatable cpu = %v, want %v", got, want)
	}
	if got := labels["n2/cpu"][LabelManaged]; got != "false" {
		t.Errorf("n2 (no NodeClaim with its providerID) managed = %q, want false", got)
	}
}

// BenchmarkStateCollectorScrape collects every family of the state
// collector over 2,000 nodes (10 pods each, one a DaemonSet's, 200 of
// them Pending) and 20,000 pods. Nodes, NodeClaims and NodePools are
// listed as controller-runtime's cache lists them (a deep copy of each
// object), pods through a podcache.Lister as the controller reads them
// (pointers, no copy). Sub-benchmarks: the whole scrape (Collect), and
// the per-node and per-pod families alone.
func BenchmarkStateCollectorScrape(b *testing.B) {
	const nodes, podsPerNode = 2000, 10
	r := &memReader{}
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Limits: karpv1.Limits(rl("cpu", "10000"))},
		Status: karpv1.NodePoolStatus{Resources: rl("cpu", "8000", "memory", "30000Gi")}}
	r.pools = []karpv1.NodePool{*pool}
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		r.nodes = append(r.nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default",
				corev1.LabelTopologyZone: "us-east-1a", corev1.LabelInstanceTypeStable: "m5.xlarge", karpv1.CapacityTypeLabelKey: "spot",
				corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", "karpenter.k8s.aws/instance-family": "m5"}},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
			Status: corev1.NodeStatus{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "58", "ephemeral-storage", "20Gi"),
				Allocatable: rl("cpu", "3920m", "memory", "15Gi", "pods", "58", "ephemeral-storage", "18Gi")},
		})
		nc := claim("c"+name, "default", "spot")
		nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
		r.claims = append(r.claims, *nc)
		for j := range podsPerNode {
			p := boundPod(fmt.Sprintf("%s-p%d", name, j), name, rl("cpu", "250m", "memory", "512Mi"), rl("memory", "1Gi"))
			p.UID = types.UID(p.Name)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4", UID: "u"}}
			switch j {
			case 0:
				p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "DaemonSet", "agent"
			case 1:
				p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
			}
			r.pods = append(r.pods, p)
		}
	}
	c := &StateCollector{Reader: r}
	c.Synced.Store(true)
	managed := map[string]bool{}
	byName := map[string]*corev1.Node{}
	for i := range r.nodes {
		managed[r.nodes[i].Spec.ProviderID] = true
		byName[r.nodes[i].Name] = &r.nodes[i]
	}
	now := time.Now()
	b.Run("Collect", func(b *testing.B) { benchCollect(b, c.Collect) })
	b.Run("collectNodes", func(b *testing.B) {
		benchCollect(b, func(ch chan<- prometheus.Metric) { collectNodes(ch, r.nodes, r.pods, managed, now) })
	})
	b.Run("collectPods", func(b *testing.B) {
		benchCollect(b, func(ch chan<- prometheus.Metric) { collectPods(ch, r.pods, byName, nil, now) })
	})
}

// benchCollect runs collect b.N times, the metrics drained by another
// goroutine, and reports the series sent per run.
func benchCollect(b *testing.B, collect func(chan<- prometheus.Metric)) {
	ch := make(chan prometheus.Metric, 1024)
	done := make(chan int)
	go func() {
		n := 0
		for range ch {
			n++
		}
		done <- n
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		collect(ch)
	}
	b.StopTimer()
	close(ch)
	b.ReportMetric(float64(<-done)/float64(b.N), "series/op")
}

// memReader lists NodePools, NodeClaims and Nodes as deep copies of its
// slices (as controller-runtime's cache copies each object it lists) and
// pods as the pointers it holds (podcache.Lister).
type memReader struct {
	client.Reader
	pools  []karpv1.NodePool
	claims []karpv1.NodeClaim
	nodes  []corev1.Node
	pods   []*corev1.Pod
}

func (r *memReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *karpv1.NodePoolList:
		l.Items = make([]karpv1.NodePool, len(r.pools))
		for i := range r.pools {
			r.pools[i].DeepCopyInto(&l.Items[i])
		}
	case *karpv1.NodeClaimList:
		l.Items = make([]karpv1.NodeClaim, len(r.claims))
		for i := range r.claims {
			r.claims[i].DeepCopyInto(&l.Items[i])
		}
	case *corev1.NodeList:
		l.Items = make([]corev1.Node, len(r.nodes))
		for i := range r.nodes {
			r.nodes[i].DeepCopyInto(&l.Items[i])
		}
	default:
		return fmt.Errorf("memReader cannot list %T", list)
	}
	return nil
}

func (r *memReader) ListPods(context.Context) ([]*corev1.Pod, error) { return r.pods, nil }
