package disruption

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// A static NodePool's NodeClaims never become consolidatable, whatever
// consolidateAfter says; the same NodeClaim in a dynamic NodePool does.
func TestStaticNodePoolNeverConsolidatable(t *testing.T) {
	nc := &karpv1.NodeClaim{}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	pool := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{
		ConsolidateAfter: karpv1.MustParseNillableDuration("0s")}}}
	now := metav1.Now().Add(time.Hour)
	if at := consolidatableAt(nc, pool, time.Time{}); at.IsZero() || now.Before(at) {
		t.Fatalf("dynamic NodePool: consolidatableAt = %v; want a time before %v", at, now)
	}
	pool.Spec.Replicas = ptr.To[int64](3)
	if at := consolidatableAt(nc, pool, time.Time{}); !at.IsZero() {
		t.Errorf("static NodePool: consolidatableAt = %v; want zero (never)", at)
	}
}
