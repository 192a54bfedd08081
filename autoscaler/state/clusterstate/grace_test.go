package clusterstate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

var (
	ciliumTaint   = corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}
	notReadyTaint = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	gpuTaint      = corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	startupTaint  = corev1.Taint{Key: "example.com/init", Effect: corev1.TaintEffectNoSchedule}
	otherTaint    = corev1.Taint{Key: "example.com/broken", Effect: corev1.TaintEffectNoSchedule}
)

// graceSnapshot is one GPU Node, registered at t0 and not initialised,
// still without nvidia.com/gpu, with its claim's taint, a startup taint,
// Cilium's and an unknown taint.
func graceSnapshot(t0 time.Time, ready corev1.ConditionStatus, readySince time.Time) *Snapshot {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///a/i-1", Taints: []corev1.Taint{gpuTaint, startupTaint, ciliumTaint, notReadyTaint, otherTaint}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("29")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(readySince)}},
		},
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-abc"},
		Spec:       karpv1.NodeClaimSpec{Taints: []corev1.Taint{gpuTaint}, StartupTaints: []corev1.Taint{startupTaint}},
		Status: karpv1.NodeClaimStatus{ProviderID: "aws:///a/i-1", NodeName: "n1",
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("1")}},
	}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
	for i := range nc.Status.Conditions {
		nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t0)
	}
	return &Snapshot{Nodes: map[string]*corev1.Node{"n1": node}, NodeClaims: map[string]*karpv1.NodeClaim{nc.Name: nc},
		NodeClaimOf: map[string]*karpv1.NodeClaim{"n1": nc}, Pods: map[string][]*corev1.Pod{}}
}

func taintKeys(ts []corev1.Taint) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts {
		out[t.Key] = true
	}
	return out
}

func TestGraceWindowHidesStartupAgentEphemeralTaintsAndAddsLateResources(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	agent := func(t corev1.Taint) bool { return t.Key == ciliumTaint.Key }
	for _, tc := range []struct {
		name       string
		grace      *Grace
		ready      corev1.ConditionStatus
		wantTaints []string
		wantGPU    bool
	}{
		{"in grace, NotReady 30s", &Grace{Window: 5 * time.Minute, Now: t0.Add(time.Minute), AgentTaint: agent}, corev1.ConditionFalse,
			[]string{gpuTaint.Key, otherTaint.Key}, true},
		{"grace over", &Grace{Window: 5 * time.Minute, Now: t0.Add(6 * time.Minute), AgentTaint: agent}, corev1.ConditionTrue,
			[]string{gpuTaint.Key, startupTaint.Key, ciliumTaint.Key, notReadyTaint.Key, otherTaint.Key}, false},
		{"grace off", &Grace{Now: t0.Add(time.Minute), AgentTaint: agent}, corev1.ConditionFalse,
			[]string{gpuTaint.Key, startupTaint.Key, ciliumTaint.Key, notReadyTaint.Key, otherTaint.Key}, false},
		{"no grace configured (disruption)", nil, corev1.ConditionFalse, []string{gpuTaint.Key}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := graceSnapshot(t0, tc.ready, t0.Add(30*time.Second))
			s.Grace = tc.grace
			nodes := s.ExistingNodes(nil, nil)
			if len(nodes) != 1 {
				t.Fatalf("%d existing nodes, want 1", len(nodes))
			}
			got := taintKeys(nodes[0].Taints)
			if len(got) != len(tc.wantTaints) {
				t.Errorf("taints %v, want %v", nodes[0].Taints, tc.wantTaints)
			}
			for _, k := range tc.wantTaints {
				if !got[k] {
					t.Errorf("taint %s missing from %v", k, nodes[0].Taints)
				}
			}
			q, ok := nodes[0].Available["nvidia.com/gpu"]
			if ok != tc.wantGPU || (ok && q.Value() != 1) {
				t.Errorf("nvidia.com/gpu available %v (%s), want %v", ok, q.String(), tc.wantGPU)
			}
		})
	}
}

func TestBriefNotReadyOfInitialisedNodeIsNotGone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := graceSnapshot(t0, corev1.ConditionFalse, t0.Add(time.Hour))
	nc := s.NodeClaims["gpu-abc"]
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	for i := range nc.Status.Conditions {
		nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t0)
	}
	s.Nodes["n1"].Spec.Taints = []corev1.Taint{gpuTaint, notReadyTaint}
	for _, tc := range []struct {
		now      time.Duration // after t0
		notReady bool          // taint still counts
	}{{time.Hour + 20*time.Second, false}, {time.Hour + 6*time.Minute, true}} {
		s.Grace = &Grace{Window: 5 * time.Minute, Now: t0.Add(tc.now)}
		got := taintKeys(s.ExistingNodes(nil, nil)[0].Taints)
		if got[notReadyTaint.Key] != tc.notReady {
			t.Errorf("NotReady for %s: not-ready taint counted %v, want %v", tc.now-time.Hour, got[notReadyTaint.Key], tc.notReady)
		}
	}
}
