package status

import (
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// The controller's lifecycle limits, at their defaults (the controller's
// --launch-ttl and --registration-ttl flags; Karpenter's defaults). The
// plugin cannot read the flags of the running controller, so a cluster
// running with other values sees these.
const (
	// LaunchTTL is how long a NodeClaim may wait for its instance.
	LaunchTTL = 5 * time.Minute
	// RegistrationTTL is how long a launched NodeClaim may wait for its
	// Node, and how long a registered one may take to initialise.
	RegistrationTTL = 15 * time.Minute
)

// conditionNodeNotReady is the NodeClaim condition the controller sets
// when its Node has been NotReady beyond the node-not-ready threshold.
const conditionNodeNotReady = "NodeNotReady"

// Stuck says why nc has been in its phase longer than the controller
// allows, or "": not Launched past LaunchTTL after creation, Launched but
// not Registered past RegistrationTTL, Registered but not Initialized past
// RegistrationTTL, or its Node reported NotReady for too long.
func Stuck(nc *karpv1.NodeClaim, now time.Time) string {
	if nc.DeletionTimestamp != nil {
		return ""
	}
	since := func(t string) (time.Duration, bool) {
		for _, c := range nc.Status.Conditions {
			if c.Type == t && c.Status == metav1.ConditionTrue {
				return now.Sub(c.LastTransitionTime.Time), true
			}
		}
		return 0, false
	}
	for _, c := range nc.Status.Conditions {
		if c.Type == conditionNodeNotReady && c.Status == metav1.ConditionTrue {
			return fmt.Sprintf("Node NotReady for %s: %s", duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)), c.Message)
		}
	}
	switch phase := Phase(nc); phase {
	case PhasePending, PhaseUnknown:
		if d := now.Sub(nc.CreationTimestamp.Time); !nc.CreationTimestamp.IsZero() && d > LaunchTTL {
			return fmt.Sprintf("no instance after %s (launch TTL %s)", duration.HumanDuration(d), LaunchTTL)
		}
	case PhaseLaunched:
		if d, ok := since(karpv1.ConditionTypeLaunched); ok && d > RegistrationTTL {
			return fmt.Sprintf("no Node registered %s after launch (registration TTL %s)", duration.HumanDuration(d), RegistrationTTL)
		}
	case PhaseRegistered:
		if d, ok := since(karpv1.ConditionTypeRegistered); ok && d > RegistrationTTL {
			return fmt.Sprintf("not Initialized %s after registration (kubectl karpx nodeclaims shows what blocks it)", duration.HumanDuration(d))
		}
	}
	return ""
}

// printStuck writes one line per NodeClaim stuck past a limit; nothing
// when none is.
func printStuck(w io.Writer, claims []karpv1.NodeClaim, now time.Time) {
	first := true
	for i := range claims {
		why := Stuck(&claims[i], now)
		if why == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nStuck NodeClaims:")
			first = false
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", claims[i].Name, Phase(&claims[i]), why)
	}
}
