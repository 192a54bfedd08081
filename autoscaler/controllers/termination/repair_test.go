package termination

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestReconcileHonoursARecordedTerminationTimestamp: a NodeClaim that node
// repair annotated karpenter.sh/nodeclaim-termination-timestamp with a
// past time has its Node's pods deleted at once (not evicted), with or
// without a terminationGracePeriod, and the annotation is not replaced by
// the later grace-period deadline. The control is a NodeClaim with only a
// terminationGracePeriod of an hour: its pod is evicted and the deadline
// recorded is the grace period's.
func TestReconcileHonoursARecordedTerminationTimestamp(t *testing.T) {
	const repaired = "2026-01-01T00:00:30Z" // the fake clock reads 00:01:00
	for _, tt := range []struct {
		name        string
		annotate    bool
		grace       *metav1.Duration
		wantDeleted bool
		wantStamp   string
	}{
		{"repaired, no grace period", true, nil, true, repaired},
		{"repaired, grace period of an hour", true, &metav1.Duration{Duration: time.Hour}, true, repaired},
		{"control: grace period only", false, &metav1.Duration{Duration: time.Hour}, false, "2026-01-01T01:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			claim := registeredClaim(func(nc *karpv1.NodeClaim) {
				nc.Spec.TerminationGracePeriod = tt.grace
				if tt.annotate {
					nc.Annotations = map[string]string{karpv1.NodeClaimTerminationTimestampAnnotationKey: repaired}
				}
			})
			c, kube := newNodeController(t, &countingCloud{}, deletingNode(), claim, pod("web"))
			if _, err := reconcileNode(t, c); err != nil {
				t.Fatal(err)
			}
			rec := c.recorder.(*record.FakeRecorder)
			deleted := false
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.HasPrefix(e, "Normal Disrupted Deleting the pod") {
					deleted = true
				}
			}
			if deleted != tt.wantDeleted || remaining(t, kube)["web"] {
				t.Fatalf("pod deleted (not evicted) %t, still there %t; want deleted %t and gone", deleted, remaining(t, kube)["web"], tt.wantDeleted)
			}
			var nc karpv1.NodeClaim
			if err := kube.Get(context.Background(), client.ObjectKey{Name: claim.Name}, &nc); err != nil {
				t.Fatal(err)
			}
			if got := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; got != tt.wantStamp {
				t.Fatalf("termination timestamp %q, want %q", got, tt.wantStamp)
			}
		})
	}
}
