package karpentermetrics

import (
	"errors"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// delta returns how much fn moved the series name{labels} (a missing
// series counts as 0).
func delta(t *testing.T, name string, labels map[string]string, fn func()) float64 {
	t.Helper()
	before := max(counter(t, name, labels), 0)
	fn()
	return max(counter(t, name, labels), 0) - before
}

// TestNodeTerminationFamilies: a Node released 90 s after its deletion
// request and 2 hours after its creation counts once in
// karpenter_nodes_terminated_total{nodepool} and is observed once in the
// termination-duration summary and the lifetime histogram, in the bucket
// of 2 h (Karpenter's bounds: 1 h then 2 h); a drained Node counts once in
// karpenter_nodes_drained_total{nodepool}.
func TestNodeTerminationFamilies(t *testing.T) {
	pool := fmt.Sprintf("term-%d", time.Now().UnixNano())
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{karpv1.NodePoolLabelKey: pool},
		CreationTimestamp: metav1.Time{Time: now.Add(-2 * time.Hour)}}}
	labels := map[string]string{LabelNodePool: pool}
	if d := delta(t, "karpenter_nodes_drained_total", labels, func() { NodeDrained(node) }); d != 1 {
		t.Errorf("karpenter_nodes_drained_total moved by %v, want 1", d)
	}
	NodeTerminated(node, now.Add(-90*time.Second), now)
	for _, name := range []string{"karpenter_nodes_terminated_total", "karpenter_nodes_termination_duration_seconds", "karpenter_nodes_lifetime_duration_seconds"} {
		if got := counter(t, name, labels); got != 1 {
			t.Errorf("%s{nodepool=%q} = %v, want 1", name, pool, got)
		}
	}
	h, err := NodesLifetimeDurationSeconds.GetMetricWithLabelValues(pool)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NodesTerminationDurationSeconds.GetMetricWithLabelValues(pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := sampleSum(t, h); got != (2 * time.Hour).Seconds() {
		t.Errorf("lifetime observed %v s, want 7200", got)
	}
	if got := sampleSum(t, s); got != 90 {
		t.Errorf("termination duration observed %v s, want 90", got)
	}
}

// sampleSum is the sum of a histogram's or summary's observations.
func sampleSum(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Histogram != nil {
		return m.Histogram.GetSampleSum()
	}
	return m.Summary.GetSampleSum()
}

// TestLifetimeBuckets: Karpenter v1.14's 21 bounds, 15 minutes to 30
// days, increasing.
func TestLifetimeBuckets(t *testing.T) {
	b := lifetimeBuckets()
	if len(b) != 21 || b[0] != 900 || b[len(b)-1] != (30*24*time.Hour).Seconds() {
		t.Fatalf("buckets %v: want 21 bounds from 900 s to 30 days", b)
	}
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			t.Fatalf("bucket %d (%v) not above %v", i, b[i], b[i-1])
		}
	}
}

// TestEvictionRequestCodes: an accepted eviction counts as code 200, a
// PodDisruptionBudget's refusal as 429 and a gone pod as 404; an error
// without an HTTP answer is not counted (control: no code moves).
func TestEvictionRequestCodes(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tt := range []struct {
		name string
		err  error
		code string
	}{
		{"accepted", nil, "200"},
		{"PDB", apierrors.NewTooManyRequests("pdb", 10), "429"},
		{"gone", apierrors.NewNotFound(gr, "p"), "404"},
	} {
		if d := delta(t, "karpenter_pods_eviction_requests_total", map[string]string{LabelCode: tt.code}, func() { EvictionRequest(tt.err) }); d != 1 {
			t.Errorf("%s: code %s moved by %v, want 1", tt.name, tt.code, d)
		}
	}
	for _, code := range []string{"200", "429", "404"} {
		if d := delta(t, "karpenter_pods_eviction_requests_total", map[string]string{LabelCode: code}, func() { EvictionRequest(errors.New("dial tcp: connection refused")) }); d != 0 {
			t.Errorf("a transport error moved code %s by %v, want 0", code, d)
		}
	}
}

// TestPodsDrainedReason: the NodeClaim's True DisruptionReason names the
// reason; without one it is "Forceful Termination", and without a
// NodeClaim "", as Karpenter's evictionReason.
func TestPodsDrainedReason(t *testing.T) {
	drifted := claim("a", "p", "spot")
	drifted.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDisruptionReason, "Drifted", "Drifted")
	for _, tt := range []struct {
		name   string
		nc     *karpv1.NodeClaim
		reason string
	}{
		{"disrupted", drifted, "Drifted"},
		{"deleted by a user", claim("b", "p", "spot"), ReasonForcefulTermination},
		{"no NodeClaim", nil, ""},
	} {
		if d := delta(t, "karpenter_pods_drained_total", map[string]string{LabelReason: tt.reason}, func() { PodsDrained(tt.nc, 3) }); d != 3 {
			t.Errorf("%s: reason %q moved by %v, want 3", tt.name, tt.reason, d)
		}
	}
}

// TestBuildLabels: the main module's version and vcs.revision, "unknown"
// without build information.
func TestBuildLabels(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	if v, g, a, c := buildLabels(bi, true); v != "v1.2.3" || c != "abc123" || g == "" || a == "" {
		t.Errorf("buildLabels = %q %q %q %q", v, g, a, c)
	}
	if v, _, _, c := buildLabels(nil, false); v != "unknown" || c != "unknown" {
		t.Errorf("without build info: version %q commit %q, want unknown", v, c)
	}
}
