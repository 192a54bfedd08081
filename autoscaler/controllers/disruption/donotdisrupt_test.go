package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	podset "github.com/karpx/karpx/autoscaler/state/pods"
)

// TestPodDoNotDisrupt: karpenter.sh/do-not-disrupt on a pod is read as
// Karpenter v1.14 reads it (IsDoNotDisruptActive): "true" always holds;
// a positive duration holds while the pod has run less than it (and while
// it has no start time); other values ("false", "0s", "-5m", "soon")
// hold nothing and are reported.
func TestPodDoNotDisrupt(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	started := metav1.NewTime(now.Add(-20 * time.Minute))
	for _, c := range []struct {
		value     string
		start     *metav1.Time
		active    bool
		until     time.Time
		wantError bool
	}{
		{value: "true", start: &started, active: true},
		{value: "30m", start: &started, active: true, until: now.Add(10 * time.Minute)},
		{value: "20m", start: &started, until: now},
		{value: "10m", start: &started, until: now.Add(-10 * time.Minute)},
		{value: "1h", active: true},
		{value: "false", start: &started, wantError: true},
		{value: "0s", start: &started, wantError: true},
		{value: "-5m", start: &started, wantError: true},
		{value: "soon", start: &started, wantError: true},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default",
			Annotations: map[string]string{karpv1.DoNotDisruptAnnotationKey: c.value}}}
		pod.Status.StartTime = c.start
		active, until, err := podset.DoNotDisruptActive(pod, now)
		if active != c.active || !until.Equal(c.until) || (err != nil) != c.wantError {
			t.Errorf("%q (started %v): active %v until %v err %v; want active %v until %v error %v",
				c.value, c.start, active, until, err, c.active, c.until, c.wantError)
		}
	}
	if active, _, err := podset.DoNotDisruptActive(&corev1.Pod{}, now); active || err != nil {
		t.Errorf("no annotation: active %v err %v", active, err)
	}
	// blockedBy holds the node for an active duration, not after it.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default",
		Annotations: map[string]string{karpv1.DoNotDisruptAnnotationKey: "30m"}}, Status: corev1.PodStatus{StartTime: &started}}
	if why, _ := blockedBy(&karpv1.NodeClaim{}, &corev1.Node{}, []*corev1.Pod{pod}, nil, now); why == "" {
		t.Error("a pod protected for 10 more minutes does not hold its node")
	}
	if why, _ := blockedBy(&karpv1.NodeClaim{}, &corev1.Node{}, []*corev1.Pod{pod}, nil, now.Add(11*time.Minute)); why != "" {
		t.Errorf("a pod whose protection ended still holds its node: %s", why)
	}
}
