package status

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// TestInterruptedNodeClaimPhase: an interrupted NodeClaim's PHASE cell
// names the interruption kind and the seconds left before EC2 reclaims
// the instance; others are unchanged.
func TestInterruptedNodeClaimPhase(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	mk := func(annotations map[string]string) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", Annotations: annotations, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
		return nc
	}
	for _, tc := range []struct {
		annotations map[string]string
		want        string
	}{
		{nil, "Initialized"},
		{map[string]string{cloudprovider.InterruptionAnnotationKey: "spot_interrupted",
			cloudprovider.InterruptionReclaimAtAnnotationKey: now.Add(31500 * time.Millisecond).Format(time.RFC3339)}, "Initialized (spot_interrupted: reclaim in 31s)"},
		{map[string]string{cloudprovider.InterruptionAnnotationKey: "scheduled_change",
			cloudprovider.InterruptionReclaimAtAnnotationKey: now.Add(-5 * time.Second).Format(time.RFC3339)}, "Initialized (scheduled_change: reclaim due 5s ago)"},
		{map[string]string{cloudprovider.InterruptionAnnotationKey: "instance_stopped"}, "Initialized (instance_stopped)"},
	} {
		table := nodeClaimTable([]karpv1.NodeClaim{mk(tc.annotations)}, now)
		if got := table.Rows[0].Cells[5]; got != tc.want {
			t.Errorf("PHASE %q, want %q", got, tc.want)
		}
	}
}
