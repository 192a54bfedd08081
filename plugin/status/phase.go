package status

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Phases of a NodeClaim as shown in the PHASE column; see Phase.
const (
	PhaseUnknown     = "Unknown"
	PhasePending     = "Pending"
	PhaseLaunched    = "Launched"
	PhaseRegistered  = "Registered"
	PhaseInitialized = "Initialized"
	PhaseTerminating = "Terminating"
)

// lifecycle is the order in which Karpenter sets a NodeClaim's conditions
// to True: the cloud instance exists, its Node joined the cluster, and the
// Node is initialized (ready, startup taints gone, resources registered).
var lifecycle = []string{
	karpv1.ConditionTypeLaunched,
	karpv1.ConditionTypeRegistered,
	karpv1.ConditionTypeInitialized,
}

// Phase summarizes a NodeClaim's lifecycle in one word:
//
//   - Terminating once its deletionTimestamp is set, whatever its conditions;
//   - otherwise the last of Launched, Registered and Initialized that is
//     True with all the conditions before it True too;
//   - Pending when the NodeClaim has conditions but Launched is not True
//     (the instance is being created, or creating it failed);
//   - Unknown when it has no conditions yet (Karpenter has not reported on
//     it).
func Phase(nc *karpv1.NodeClaim) string {
	if nc.DeletionTimestamp != nil {
		return PhaseTerminating
	}
	if len(nc.Status.Conditions) == 0 {
		return PhaseUnknown
	}
	phase := PhasePending
	for _, t := range lifecycle {
		if nodeClaimCondition(nc, t) != metav1.ConditionTrue {
			break
		}
		phase = t
	}
	return phase
}

// nodeClaimCondition returns the status of nc's condition of type t, or
// Unknown when there is no such condition.
func nodeClaimCondition(nc *karpv1.NodeClaim, t string) metav1.ConditionStatus {
	for _, c := range nc.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

// nodePoolCondition returns the status of np's condition of type t, or
// Unknown when there is no such condition.
func nodePoolCondition(np *karpv1.NodePool, t string) metav1.ConditionStatus {
	for _, c := range np.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

// formatCPU renders a CPU quantity in cores: "12", or "3.5" for fractions
// of a core (millicore precision).
func formatCPU(q resource.Quantity) string {
	m := q.MilliValue()
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64)
}

var binaryUnits = []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}

// formatBytes renders a memory quantity in the largest binary unit (Ki, Mi,
// Gi, …) in which it is at least 1, with at most one decimal: "16Gi",
// "44.4Gi", "512Mi". Values below 1Ki are plain bytes.
func formatBytes(q resource.Quantity) string {
	v := float64(q.Value())
	unit := ""
	for _, u := range binaryUnits {
		if v < 1024 {
			break
		}
		v /= 1024
		unit = u
	}
	return strconv.FormatFloat(roundTenth(v), 'f', -1, 64) + unit
}

func roundTenth(v float64) float64 {
	return float64(int64(v*10+0.5)) / 10
}

// usage renders "used/limit" for one resource of a NodePool, with "-" as
// the limit when the pool does not limit that resource.
func usage(used resource.Quantity, limits karpv1.Limits, name corev1.ResourceName, format func(resource.Quantity) string) string {
	limit := "-"
	if l, ok := limits[name]; ok {
		limit = format(l)
	}
	return format(used) + "/" + limit
}
