package karpentermetrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

func claim(name, pool, capacityType string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		karpv1.NodePoolLabelKey: pool, karpv1.CapacityTypeLabelKey: capacityType}}}
}

// counter reads the value of the series of family name with exactly labels
// from controller-runtime's registry, -1 when there is none.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if sameLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				case m.Summary != nil:
					return float64(m.Summary.GetSampleCount())
				}
			}
		}
	}
	return -1
}

func sameLabels(m *dto.Metric, want map[string]string) bool {
	if len(m.Label) != len(want) {
		return false
	}
	for _, l := range m.Label {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

func TestNodeClaimCountersUseKarpenterLabels(t *testing.T) {
	pool := fmt.Sprintf("pool-%d", time.Now().UnixNano())
	nc := claim("a", pool, "spot")
	NodeClaimCreated(nc, ReasonProvisioned)
	NodeClaimCreated(nc, "Underutilized")
	relaxed := claim("b", pool, "on-demand")
	relaxed.Annotations = map[string]string{karpv1.NodeClaimMinValuesRelaxedAnnotationKey: "true"}
	NodeClaimCreated(relaxed, ReasonProvisioned)
	NodeClaimDisrupted(nc, "Underutilized")
	NodeClaimDisrupted(nc, "InsufficientCapacity")
	NodeClaimDisrupted(nc, "GarbageCollected")
	NodeClaimTerminated(nc)
	NodeClaimTerminated(nc)

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"karpenter_nodeclaims_created_total", map[string]string{"reason": "provisioned", "nodepool": pool, "min_values_relaxed": "false"}, 1},
		{"karpenter_nodeclaims_created_total", map[string]string{"reason": "underutilized", "nodepool": pool, "min_values_relaxed": "false"}, 1},
		{"karpenter_nodeclaims_created_total", map[string]string{"reason": "provisioned", "nodepool": pool, "min_values_relaxed": "true"}, 1},
		{"karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "underutilized", "nodepool": pool, "capacity_type": "spot"}, 1},
		{"karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "insufficient_capacity", "nodepool": pool, "capacity_type": "spot"}, 1},
		{"karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "garbage_collected", "nodepool": pool, "capacity_type": "spot"}, 1},
		{"karpenter_nodeclaims_terminated_total", map[string]string{"nodepool": pool, "capacity_type": "spot"}, 2},
	} {
		if got := counter(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The families are Karpenter's own collectors, not copies.
	if NodeClaimsCreatedTotal != kmetrics.NodeClaimsCreatedTotal {
		t.Error("NodeClaimsCreatedTotal is not sigs.k8s.io/karpenter/pkg/metrics.NodeClaimsCreatedTotal")
	}
}

func TestSnakeCaseMatchesKarpenterReasons(t *testing.T) {
	for in, want := range map[string]string{"Underutilized": "underutilized", "Empty": "empty", "Drifted": "drifted",
		"Expired": "expired", "InsufficientCapacity": "insufficient_capacity", "NodeClassNotReady": "node_class_not_ready",
		ReasonGarbageCollected: "garbage_collected", ReasonRegistrationTimeout: "registration_timeout", ReasonLaunchTimeout: "launch_timeout",
		"spot_interrupted": "spot_interrupted", "instance_terminated": "instance_terminated"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestObserveSchedulingFeedsBothNames(t *testing.T) {
	before := counter(t, "karpenter_scheduler_scheduling_duration_seconds", map[string]string{"controller": "provisioner"})
	ObserveScheduling(ControllerProvisioner, 2*time.Second)
	after := counter(t, "karpenter_scheduler_scheduling_duration_seconds", map[string]string{"controller": "provisioner"})
	if after != max(before, 0)+1 {
		t.Errorf("scheduler histogram count %v → %v, want one more", before, after)
	}
	if got := counter(t, "karpenter_provisioner_scheduling_duration_seconds", map[string]string{"controller": "provisioner"}); got < 1 {
		t.Errorf("karpenter_provisioner_scheduling_duration_seconds count = %v, want ≥ 1", got)
	}
	// Karpenter's DurationBuckets: a 2-s pass lands in le=2.5, not le=1.
	mfs, _ := crmetrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "karpenter_scheduler_scheduling_duration_seconds" {
			continue
		}
		for _, b := range mf.Metric[0].Histogram.Bucket {
			if b.GetUpperBound() == 1 && b.GetCumulativeCount() == mf.Metric[0].Histogram.GetSampleCount() {
				t.Error("the 2-s observation fell in the le=1 bucket")
			}
		}
		if n := len(mf.Metric[0].Histogram.Bucket); n != len(kmetrics.DurationBuckets()) {
			t.Errorf("%d buckets, want Karpenter's %d", n, len(kmetrics.DurationBuckets()))
		}
	}
}

type fakeCloud struct{ err error }

func (f fakeCloud) Create(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, f.err
}
func (f fakeCloud) Delete(context.Context, *karpv1.NodeClaim) error        { return f.err }
func (f fakeCloud) Get(context.Context, string) (*karpv1.NodeClaim, error) { return nil, f.err }
func (f fakeCloud) List(context.Context) ([]*karpv1.NodeClaim, error)      { return nil, f.err }
func (f fakeCloud) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return nil, f.err
}
func (f fakeCloud) IsDrifted(context.Context, *karpv1.NodeClaim) (string, error) { return "", f.err }

func TestDecoratorTimesCallsAndNamesErrors(t *testing.T) {
	ctrl := fmt.Sprintf("test-%d", time.Now().UnixNano())
	ctx := context.Background()
	ok := Decorate(fakeCloud{}, ctrl, "aws")
	if _, err := ok.Get(ctx, "aws:///us-east-1a/i-1"); err != nil {
		t.Fatal(err)
	}
	ice := Decorate(fakeCloud{err: fmt.Errorf("launching: %w", &cloudprovider.InsufficientCapacityError{Err: errors.New("ICE")})}, ctrl, "aws")
	_, _ = ice.Create(ctx, claim("a", "p", "spot"))
	_, _ = Decorate(fakeCloud{err: &cloudprovider.NodeClaimNotFoundError{Err: errors.New("gone")}}, ctrl, "aws").Get(ctx, "x")
	_, _ = Decorate(fakeCloud{err: &cloudprovider.NodeClassNotReadyError{NodeClass: "c", Reason: "r"}}, ctrl, "aws").GetInstanceTypes(ctx, nil)
	_ = Decorate(fakeCloud{err: errors.New("throttled")}, ctrl, "aws").Delete(ctx, claim("a", "p", "spot"))

	if got := counter(t, "karpenter_cloudprovider_duration_seconds", map[string]string{"controller": ctrl, "method": "Get", "provider": "aws"}); got != 2 {
		t.Errorf("Get duration count = %v, want 2", got)
	}
	for method, errLabel := range map[string]string{"Create": "InsufficientCapacityError", "Get": "NodeClaimNotFoundError",
		"GetInstanceTypes": "NodeClassNotReadyError", "Delete": ""} {
		if got := counter(t, "karpenter_cloudprovider_errors_total", map[string]string{"controller": ctrl, "method": method, "provider": "aws", "error": errLabel}); got != 1 {
			t.Errorf("errors_total{method=%s,error=%q} = %v, want 1", method, errLabel, got)
		}
	}
}

// slowCloud answers Get after stepping its fake clock by took.
type slowCloud struct {
	fakeCloud
	clk  *clocktesting.FakeClock
	took time.Duration
}

func (s slowCloud) Get(context.Context, string) (*karpv1.NodeClaim, error) {
	s.clk.Step(s.took)
	return nil, nil
}

// The duration observed is the injected clock's time across the call.
func TestDecoratorTimesOnItsClock(t *testing.T) {
	ctrl := fmt.Sprintf("test-clock-%d", time.Now().UnixNano())
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := DecorateWithClock(slowCloud{clk: fc, took: 3 * time.Second}, ctrl, "aws", fc).Get(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"controller": ctrl, "method": "Get", "provider": "aws"}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if mf.GetName() == "karpenter_cloudprovider_duration_seconds" && sameLabels(m, labels) {
				if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 3 {
					t.Errorf("Get observed %d times, %v s in all; want once, 3 s", h.GetSampleCount(), h.GetSampleSum())
				}
				return
			}
		}
	}
	t.Error("no karpenter_cloudprovider_duration_seconds series for the call")
}

func TestStateCollector(t *testing.T) {
	cpu4 := resource.MustParse("4")
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: karpv1.NodePoolSpec{Limits: karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1500m"), "nvidia.com/gpu": resource.MustParse("2")}},
		Status: karpv1.NodePoolStatus{Resources: corev1.ResourceList{corev1.ResourceCPU: cpu4, corev1.ResourceMemory: resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20G")}}}
	launched := claim("launched", "default", "spot")
	launched.Status.ProviderID = "aws:///us-east-1a/i-1"
	launched.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	launched.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
	pending := claim("pending", "default", "spot")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-2"}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pool, launched, pending, node, other).Build()
	c := &StateCollector{Reader: kube}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP karpenter_cluster_state_synced Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state
# TYPE karpenter_cluster_state_synced gauge
karpenter_cluster_state_synced 0
`)); err != nil {
		t.Errorf("before sync: %v", err)
	}
	c.Synced.Store(true)
	// launched+n1 share a providerID (1), pending (1), n2 (1).
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP karpenter_cluster_state_node_count Current count of nodes in cluster state
# TYPE karpenter_cluster_state_node_count gauge
karpenter_cluster_state_node_count 3
# HELP karpenter_cluster_state_synced Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state
# TYPE karpenter_cluster_state_synced gauge
karpenter_cluster_state_synced 1
# HELP karpenter_nodepools_limit Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.
# TYPE karpenter_nodepools_limit gauge
karpenter_nodepools_limit{nodepool="default",resource_type="cpu"} 1.5
karpenter_nodepools_limit{nodepool="default",resource_type="nvidia.com/gpu"} 2
# HELP karpenter_nodepools_usage The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.
# TYPE karpenter_nodepools_usage gauge
karpenter_nodepools_usage{nodepool="default",resource_type="cpu"} 4
karpenter_nodepools_usage{nodepool="default",resource_type="ephemeral_storage"} 2e+10
karpenter_nodepools_usage{nodepool="default",resource_type="memory"} 1.073741824e+09
# HELP karpx_nodeclaims NodeClaims by NodePool and lifecycle phase (Pending, Launched, Registered, Initialized, Terminating).
# TYPE karpx_nodeclaims gauge
karpx_nodeclaims{nodepool="default",phase="Initialized"} 0
karpx_nodeclaims{nodepool="default",phase="Launched"} 0
karpx_nodeclaims{nodepool="default",phase="Pending"} 1
karpx_nodeclaims{nodepool="default",phase="Registered"} 1
karpx_nodeclaims{nodepool="default",phase="Terminating"} 0
`), MetricClusterStateNodeCount, MetricClusterStateSynced, MetricNodePoolLimit, MetricNodePoolUsage, MetricNodeClaims); err != nil {
		t.Errorf("after sync: %v", err)
	}
}

func TestNodeClaimPhase(t *testing.T) {
	nc := claim("a", "p", "spot")
	steps := []struct {
		condition, want string
	}{
		{"", PhasePending},
		{karpv1.ConditionTypeRegistered, PhasePending}, // Registered without Launched: not a lifecycle step yet
		{karpv1.ConditionTypeLaunched, PhaseRegistered},
		{karpv1.ConditionTypeInitialized, PhaseInitialized},
	}
	for _, s := range steps {
		if s.condition != "" {
			nc.StatusConditions().SetTrue(s.condition)
		}
		if got := NodeClaimPhase(nc); got != s.want {
			t.Errorf("after %q: phase %s, want %s", s.condition, got, s.want)
		}
	}
	nc.StatusConditions().SetFalse(karpv1.ConditionTypeRegistered, "NodeGone", "gone")
	if got := NodeClaimPhase(nc); got != PhaseLaunched {
		t.Errorf("Registered=False: phase %s, want %s", got, PhaseLaunched)
	}
	now := metav1.Now()
	nc.DeletionTimestamp = &now
	if got := NodeClaimPhase(nc); got != PhaseTerminating {
		t.Errorf("deleting: phase %s, want %s", got, PhaseTerminating)
	}
}

func TestPodStartupObservedOnceWhenPendingPodBecomesReady(t *testing.T) {
	created := time.Now().Add(-time.Hour).Truncate(time.Second)
	pod := func(phase corev1.PodPhase, readyAfter time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(created)}, Status: corev1.PodStatus{Phase: phase}}
		if readyAfter > 0 {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(readyAfter))}}
		}
		return p
	}
	sum := func() (uint64, float64) {
		m := &dto.Metric{}
		if err := PodStartupDurationSeconds.Write(m); err != nil {
			t.Fatal(err)
		}
		return m.Summary.GetSampleCount(), m.Summary.GetSampleSum()
	}
	n0, s0 := sum()
	ObservePodStartup(pod(corev1.PodPending, 0), pod(corev1.PodRunning, 42*time.Second))              // started: observed
	ObservePodStartup(pod(corev1.PodRunning, 42*time.Second), pod(corev1.PodRunning, 50*time.Second)) // already ready: not again
	ObservePodStartup(pod(corev1.PodPending, 0), pod(corev1.PodPending, 0))                           // still pending
	n1, s1 := sum()
	if n1-n0 != 1 || s1-s0 != 42 {
		t.Errorf("observed %d samples summing %vs, want 1 of 42s", n1-n0, s1-s0)
	}
}
