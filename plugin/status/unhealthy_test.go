package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestPrintUnhealthy: a Node with Ready=False and one with the node
// monitoring agent's NetworkingReady=False are listed with how long and
// why; the second, whose NodeClaim node repair deleted with a termination
// timestamp, is "being repaired". A Node Ready with MemoryPressure=False
// (the healthy value of a condition not named "...Ready") is not listed.
func TestPrintUnhealthy(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cond := func(typ corev1.NodeConditionType, st corev1.ConditionStatus, reason string, ago time.Duration) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: st, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-ago))}
	}
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", 12*time.Minute)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "", time.Hour), cond("NetworkingReady", corev1.ConditionFalse, "IPAMDNotReady", 31*time.Minute)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n3"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "", time.Hour), cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "", time.Hour)}}},
	}
	deleted := metav1.NewTime(now.Add(-time.Minute))
	claims := []karpv1.NodeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: karpv1.NodeClaimStatus{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", DeletionTimestamp: &deleted,
			Annotations: map[string]string{karpv1.NodeClaimTerminationTimestampAnnotationKey: "2026-01-01T11:59:00Z"}}, Status: karpv1.NodeClaimStatus{NodeName: "n2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Status: karpv1.NodeClaimStatus{NodeName: "n3"}},
	}
	var out bytes.Buffer
	printUnhealthy(&out, claims, nodes, now)
	want := `
Unhealthy nodes:
  a (Unknown, node n1): Ready=False for 12m (KubeletNotReady)
  b (Terminating, node n2): NetworkingReady=False for 31m (IPAMDNotReady); being repaired (pods deleted from 2026-01-01T11:59:00Z)
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	printUnhealthy(&out, claims[2:], nodes, now)
	if strings.TrimSpace(out.String()) != "" {
		t.Fatalf("healthy nodes printed %q", out.String())
	}
}
