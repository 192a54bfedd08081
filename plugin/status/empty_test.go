package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	clocktesting "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestEmptyNodesFlagsOverdueAndBlocked(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	pool := func(name, after, budget string) karpv1.NodePool {
		np := karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(after)
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
		return np
	}
	claim := func(name, pool string, emptySince time.Duration, annotations map[string]string) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}, Annotations: annotations},
			Status: karpv1.NodeClaimStatus{NodeName: "node-" + name, LastPodEventTime: metav1.NewTime(now.Add(-emptySince))}}
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
		for i := range nc.Status.Conditions {
			nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now.Add(-time.Hour))
		}
		return nc
	}
	pools := []karpv1.NodePool{pool("fast", "30s", "100%"), pool("never", "Never", "100%"), pool("frozen", "30s", "0")}
	claims := []karpv1.NodeClaim{
		claim("overdue", "fast", 10*time.Minute, nil),
		claim("due", "fast", time.Minute, nil),
		claim("waiting", "fast", 10*time.Second, nil),
		claim("busy", "fast", 10*time.Minute, nil),
		claim("kept", "fast", 10*time.Minute, map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}),
		claim("never", "never", 10*time.Minute, nil),
		claim("budget", "frozen", 10*time.Minute, nil),
	}
	var nodes []corev1.Node
	for _, nc := range claims {
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName}})
	}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{NodeName: "node-busy"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{Name: "agent", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Controller: new(bool)}}},
			Spec: corev1.PodSpec{NodeName: "node-due"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
	*pods[1].OwnerReferences[0].Controller = true
	rows := emptyNodes(pools, claims, nodes, pods, clocktesting.NewFakeClock(now))
	var out bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(emptyNodeTable(rows, now), &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	want := map[string][]string{
		"overdue": {"OVERDUE", "<none>"},
		"due":     {"due"},
		"waiting": {"waiting"},
		"kept":    {"OVERDUE", "do-not-disrupt on the NodeClaim"},
		"never":   {"Never", "consolidateAfter: Never"},
		"budget":  {"disruption budget"},
	}
	for name, parts := range want {
		line := ""
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, " "+name+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("no row for %s", name)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(line, p) {
				t.Errorf("row %q lacks %q", line, p)
			}
		}
	}
	if strings.Contains(text, " busy ") {
		t.Error("a node with a reschedulable pod is listed as empty")
	}
}
