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
// collector over 2,000 nodes (10 pods each, one a DaemonSet's) and 20,000
// pods, read through a podcache.Lister as the controller reads them.
func BenchmarkStateCollectorScrape(b *testing.B) {
	const nodes, podsPerNode = 2000, 10
	var objs []client.Object
	var pods []*corev1.Pod
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		objs = append(objs, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default",
				corev1.LabelTopologyZone: "us-east-1a", corev1.LabelInstanceTypeStable: "m5.xlarge", karpv1.CapacityTypeLabelKey: "spot"}},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
			Status: corev1.NodeStatus{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "58", "ephemeral-storage", "20Gi"),
				Allocatable: rl("cpu", "3920m", "memory", "15Gi", "pods", "58", "ephemeral-storage", "18Gi")},
		})
		nc := claim("c"+name, "default", "spot")
		nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
		objs = append(objs, nc)
		for j := range podsPerNode {
			p := boundPod(fmt.Sprintf("%s-p%d", name, j), name, rl("cpu", "250m", "memory", "512Mi"), rl("memory", "1Gi"))
			if j == 0 {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u"}}
			}
			pods = append(pods, p)
		}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	c := &StateCollector{Reader: podLister{kube, pods}}
	c.Synced.Store(true)
	var nodeList corev1.NodeList
	if err := kube.List(context.Background(), &nodeList); err != nil {
		b.Fatal(err)
	}
	managed := map[string]bool{}
	for i := range nodeList.Items {
		managed[nodeList.Items[i].Spec.ProviderID] = true
	}
	now := time.Now()
	b.Run("Collect", func(b *testing.B) { benchCollect(b, c.Collect) })
	b.Run("collectNodes", func(b *testing.B) {
		benchCollect(b, func(ch chan<- prometheus.Metric) { collectNodes(ch, nodeList.Items, pods, managed, now) })
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

// podLister is a client.Reader whose pods are a fixed slice of pointers,
// as podcache.Client serves the informer store's.
type podLister struct {
	client.Reader
	pods []*corev1.Pod
}

func (p podLister) ListPods(ctx context.Context) ([]*corev1.Pod, error) { return p.pods, nil }
