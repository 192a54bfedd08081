package clusterstate

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// InitializationBlockers returns everything that keeps nc's Node from
// being Initialized, in this order: the Node is not Ready; each startup
// taint and known ephemeral taint still present; each requested extended
// resource (anything but cpu, memory, pods and ephemeral-storage) missing
// or zero in status.allocatable. Empty means initialised.
func InitializationBlockers(nc *karpv1.NodeClaim, node *corev1.Node) []string {
	var out []string
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		out = append(out, "Node is not Ready")
	}
	for _, t := range node.Spec.Taints {
		for _, st := range nc.Spec.StartupTaints {
			if t.MatchTaint(&st) {
				out = append(out, fmt.Sprintf("startup taint %s still present", t.ToString()))
			}
		}
		for _, key := range EphemeralTaintKeys {
			if t.Key == key {
				out = append(out, fmt.Sprintf("taint %s still present", t.ToString()))
			}
		}
	}
	names := make([]string, 0, len(nc.Spec.Resources.Requests))
	for name := range nc.Spec.Resources.Requests {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		q := nc.Spec.Resources.Requests[name]
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourcePods ||
			name == corev1.ResourceEphemeralStorage || q.IsZero() {
			continue
		}
		if a, ok := node.Status.Allocatable[name]; !ok || a.IsZero() {
			out = append(out, fmt.Sprintf("requested resource %s not allocatable yet", name))
		}
	}
	return out
}
