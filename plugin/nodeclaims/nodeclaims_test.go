package nodeclaims

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/output"
)

func TestNodeClaimsTable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-10 * time.Minute).Add(d)) }
	mk := func(name string, conds map[string]time.Duration) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(0), Labels: map[string]string{karpv1.NodePoolLabelKey: "gpu"}},
			Spec: karpv1.NodeClaimSpec{Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
		for _, typ := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
			d, ok := conds[typ]
			if !ok {
				continue
			}
			nc.StatusConditions().SetTrue(typ)
			for i := range nc.Status.Conditions {
				if nc.Status.Conditions[i].Type == typ {
					nc.Status.Conditions[i].LastTransitionTime = at(d)
				}
			}
		}
		return nc
	}
	starting := mk("gpu-a", map[string]time.Duration{karpv1.ConditionTypeLaunched: 5 * time.Second, karpv1.ConditionTypeRegistered: 25 * time.Second})
	starting.Status.ProviderID, starting.Status.NodeName = "aws:///a/i-1", "n1"
	done := mk("gpu-b", map[string]time.Duration{karpv1.ConditionTypeLaunched: 5 * time.Second, karpv1.ConditionTypeRegistered: 25 * time.Second, karpv1.ConditionTypeInitialized: 95 * time.Second})
	pending := mk("gpu-c", nil)
	other := mk("cpu-d", nil)
	other.Labels[karpv1.NodePoolLabelKey] = "default"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///a/i-1",
		Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}}}
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)}, Status: corev1.PodStatus{Phase: phase}}
	}
	ev := func(name, podName, claim string, ts time.Duration) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Reason: "Nominated",
			Message: "Pod should schedule on: nodeclaim/" + claim, LastTimestamp: at(ts * time.Second),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: podName, UID: k8stypes.UID("uid-" + podName)}}
	}
	s := cluster.NewScheme()
	kube := fake.NewClientBuilder().WithScheme(s).
		WithObjects(starting, done, pending, other, node, pod("p1", corev1.PodPending), pod("p2", corev1.PodPending), pod("p3", corev1.PodSucceeded),
			ev("e1", "p1", "gpu-a", 1), ev("e2", "p2", "gpu-c", 1), ev("e3", "p2", "gpu-a", 2), ev("e4", "p3", "gpu-a", 1),
			ev("e5", "gone", "gpu-a", 1)).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} }).
		Build()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := newCmd(&Options{IOStreams: streams, Factory: &cluster.StaticFactory{ClientValue: kube, SchemeValue: s},
		Print: output.NewFlags(true), Now: func() time.Time { return now }})
	cmd.SetArgs([]string{"--nodepool", "gpu"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 gpu rows:\n%s%s", out.String(), errOut.String())
	}

	for _, want := range []struct{ row, substr string }{
		{lines[1], "gpu-a"}, {lines[1], "Registered"}, {lines[1], "5s"}, {lines[1], "20s"}, {lines[1], "9m35s"},
		{lines[1], "Node is not Ready; taint node.kubernetes.io/not-ready:NoSchedule still present; requested resource nvidia.com/gpu not allocatable yet"},
		{lines[2], "Initialized"}, {lines[2], "70s"}, {lines[2], "<none>"},
		{lines[3], "Pending"}, {lines[3], "waiting for instance"},
	} {
		if !strings.Contains(want.row, want.substr) {
			t.Errorf("row %q lacks %q", want.row, want.substr)
		}
	}
	// Nominated: gpu-a has p1 and p2 (p2's latest nomination), not the
	// finished p3 nor a deleted pod; gpu-c lost p2 to gpu-a.
	if f := strings.Fields(lines[1]); f[6] != "2" {
		t.Errorf("gpu-a nominated %q, want 2: %q", f[6], lines[1])
	}
	if f := strings.Fields(lines[3]); f[6] != "0" {
		t.Errorf("gpu-c nominated %q, want 0: %q", f[6], lines[3])
	}
}
