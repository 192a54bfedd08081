package cloudprovider

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// RepairPolicy is one unhealthy state of a Node that node repair acts on:
// a Node whose condition ConditionType has had status ConditionStatus for
// at least TolerationDuration (measured from the condition's
// lastTransitionTime) has its NodeClaim deleted forcefully and replaced.
// It is the value of Karpenter's RepairPolicy (sigs.k8s.io/karpenter
// pkg/cloudprovider/types.go@v1.14.0), field for field.
type RepairPolicy struct {
	// ConditionType is the Node condition's type, e.g. "Ready" or a node
	// monitoring agent's "NetworkingReady".
	ConditionType corev1.NodeConditionType
	// ConditionStatus is the status that is unhealthy: "False" or
	// "Unknown" (or "True" for a condition that reports a problem).
	ConditionStatus corev1.ConditionStatus
	// TolerationDuration is how long the condition may hold that status
	// before the Node is repaired; positive.
	TolerationDuration time.Duration
}

// RepairPolicyProvider is implemented by a CloudProvider that knows which
// Node conditions mean its nodes are broken (Karpenter's
// CloudProvider.RepairPolicies, optional here so that cloud providers
// without node repair need not change). The node health controller
// (autoscaler/controllers/node/health) runs only behind the NodeRepair
// feature gate and only for a provider that returns at least one policy,
// as Karpenter v1.14 registers it (pkg/controllers/controllers.go).
type RepairPolicyProvider interface {
	// RepairPolicies returns the policies, in a fixed order; the caller
	// must not modify the slice.
	RepairPolicies() []RepairPolicy
}
