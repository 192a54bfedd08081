package headtohead

import (
	"time"
)

// Bind steps: "Node Ready → pod Running (launched nodes)" split into
// where the time goes, as the table names the steps: the autoscaler's
// part (its registration removes karpenter.sh/unregistered) apart from
// kube-scheduler's and kwok's, which are the same binaries on every side
// but queue more when a side's Nodes come Ready closer together.
const (
	// bindStepRegistered is, per launched Node, from Ready to the first
	// time it carried no karpenter.sh/unregistered taint: the
	// autoscaler's registration alone.
	bindStepRegistered = "Node Ready → karpenter.sh/unregistered gone"
	// bindStepTaints is, per launched Node, from Ready to the first time
	// it carried no NoSchedule or NoExecute taint: the autoscaler's
	// registration (karpenter.sh/unregistered) and kube-controller-
	// manager's node.kubernetes.io/not-ready.
	bindStepTaints = "Node Ready → taints gone"
	// bindStepScheduler is, per pod on a launched Node, from the later of
	// its Node's taints gone and the pod's creation to the pod bound
	// (spec.nodeName set): kube-scheduler's queue and backoff.
	bindStepScheduler = "taints gone or pod created → pod bound"
	// bindStepKubelet is, per pod on a launched Node, from bound to
	// Running and Ready: kwok's pod stages standing in for the kubelet.
	bindStepKubelet = "pod bound → Running"
)

// bindSteps are the bind steps in the table's order.
var bindSteps = []string{bindStepRegistered, bindStepTaints, bindStepScheduler, bindStepKubelet}

// SplitBind returns, per bind step (bindSteps), its seconds for the pods
// of workload on the Nodes named in launched (the Nodes of NodeClaims the
// burst created), from the recorder's watch times. A Node counts once
// Ready and without the taint of the step; a pod once bound and Running on
// a Node without blocking taints. Steps that ended before they began (a
// Node whose taints were gone before Ready) count as 0.
func SplitBind(pods []podRecord, nodes map[string]nodeRecord, launched map[string]bool, workload string) map[string][]float64 {
	out := map[string][]float64{}
	since := func(from, to time.Time) float64 { return max(0, to.Sub(from).Seconds()) }
	for name := range launched {
		n, ok := nodes[name]
		if !ok || n.ready.IsZero() {
			continue
		}
		if !n.registered.IsZero() {
			out[bindStepRegistered] = append(out[bindStepRegistered], since(n.ready, n.registered))
		}
		if !n.schedulable.IsZero() {
			out[bindStepTaints] = append(out[bindStepTaints], since(n.ready, n.schedulable))
		}
	}
	for _, p := range pods {
		if p.workload != workload || !launched[p.nodeName] || p.bound.IsZero() || p.running.IsZero() {
			continue
		}
		n, ok := nodes[p.nodeName]
		if !ok || n.schedulable.IsZero() {
			continue
		}
		out[bindStepScheduler] = append(out[bindStepScheduler], since(maxTime(n.schedulable, p.created), p.bound))
		out[bindStepKubelet] = append(out[bindStepKubelet], since(p.bound, p.running))
	}
	return out
}

// addBindSplit adds s's p50 and p99 per bind step to res.
func addBindSplit(res *Results, s map[string][]float64) {
	for _, step := range bindSteps {
		res.add("burst: "+step+" (launched nodes) p50", "s", percentile(s[step], 50), "")
		res.add("burst: "+step+" (launched nodes) p99", "s", percentile(s[step], 99), "")
	}
}
