package status

import (
	"fmt"
	"math"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// interruptionNote returns what the PHASE cell adds for a NodeClaim the
// interruption controller marked: " (KIND: reclaim in Ns)", or " (KIND:
// reclaim due Ns ago)" once the time has passed, or " (KIND)" without a
// reclaim time; "" for a NodeClaim not interrupted.
func interruptionNote(nc *karpv1.NodeClaim, now time.Time) string {
	kind := nc.Annotations[cloudprovider.InterruptionAnnotationKey]
	if kind == "" {
		return ""
	}
	at, err := time.Parse(time.RFC3339, nc.Annotations[cloudprovider.InterruptionReclaimAtAnnotationKey])
	if err != nil {
		return " (" + kind + ")"
	}
	left := at.Sub(now).Seconds()
	if left >= 0 {
		return fmt.Sprintf(" (%s: reclaim in %ds)", kind, int(math.Ceil(left)))
	}
	return fmt.Sprintf(" (%s: reclaim due %ds ago)", kind, int(math.Floor(-left)))
}
