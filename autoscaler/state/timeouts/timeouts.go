package timeouts

import "time"

// Defaults shared by the operator's flags (autoscaler/operator/options.go),
// the provisioner, the NodeClaim lifecycle controller and disruption.
const (
	// LaunchTTL is how long a NodeClaim may stay without an instance
	// before it is deleted and its pods planned again: 5m, Karpenter's
	// LaunchTimeout (sigs.k8s.io/karpenter
	// pkg/controllers/nodeclaim/lifecycle/liveness.go@v1.14.0).
	LaunchTTL = 5 * time.Minute
	// RegistrationTTL is how long a launched NodeClaim may wait for its
	// Node to register: 15m, Karpenter's registrationTimeout (same file).
	RegistrationTTL = 15 * time.Minute
	// InitializationGrace is the grace window of starting and briefly
	// NotReady nodes (--initialization-grace-window): 5m.
	InitializationGrace = 5 * time.Minute
)

// Default sets *d to def when *d is zero or negative (unset), and leaves
// it alone otherwise. It is how controllers' Options fill their defaults.
func Default(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
