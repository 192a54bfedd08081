package disruption

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// TestDisruptedReasonIsTheInterruptionKind: an interrupted NodeClaim is
// counted in karpenter_nodeclaims_disrupted_total with its interruption
// kind, as Karpenter's AWS interruption controller counts its deletions;
// any other with the command's reason.
func TestDisruptedReasonIsTheInterruptionKind(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if got := disruptedReason(nc, ReasonEmpty); got != ReasonEmpty {
		t.Errorf("not interrupted: %q, want %q", got, ReasonEmpty)
	}
	nc.Annotations = map[string]string{cloudprovider.InterruptionAnnotationKey: "scheduled_change"}
	if got := disruptedReason(nc, ReasonInterrupted); got != "scheduled_change" {
		t.Errorf("interrupted: %q, want scheduled_change", got)
	}
}
