package headtohead

import (
	"fmt"
	"math"
	"time"
)

// Pod path: a burst pod's pending → Running seconds split, pod by pod,
// into the steps of the launch that served it, as the table names them.
// The other burst figures are per NodeClaim or per Node, so a NodeClaim
// for one pod weighs as much as one for eleven; these are per pod, and
// their means add up to the mean pending → Running of the pods counted,
// which says which step holds a side's burst percentiles.
const (
	pathDecision   = "pod created → its NodeClaim created"
	pathLaunch     = "NodeClaim created → CreateFleet issued"
	pathRegister   = "CreateFleet issued → Node registered"
	pathReady      = "Node registered → Node Ready"
	pathTaints     = "Node Ready → taints gone"
	pathScheduler  = "taints gone → pod bound"
	pathKubelet    = "pod bound → Running"
	pathStepsTotal = "pending → Running"
)

// podPathSteps are the pod path's steps in order.
var podPathSteps = []string{pathDecision, pathLaunch, pathRegister, pathReady, pathTaints, pathScheduler, pathKubelet}

// PodPath returns, per step of podPathSteps and for pathStepsTotal, the
// seconds of each Running pod of workload on a Node of a NodeClaim the
// burst created: claims and launched are keyed by Node name (launched
// holds the instance's CreateFleet time, ec2sim's LaunchTime), nodes by
// name. Each step ends at the later of its own event and the previous
// step's end, so a step whose event came first (a pod created after its
// Node was Ready) counts 0 and the steps of a pod add up to its total. It
// also returns how many Running pods of workload were left out: on a Node
// the burst did not launch, or one whose CreateFleet time, registration,
// Ready or untainting was not seen.
func PodPath(pods []podRecord, claims map[string]nodeClaimRecord, nodes map[string]nodeRecord, launched map[string]time.Time, workload string) (map[string][]float64, int) {
	out := map[string][]float64{}
	left := 0
	for _, p := range pods {
		if p.workload != workload || p.running.IsZero() {
			continue
		}
		nc, okClaim := claims[p.nodeName]
		n, okNode := nodes[p.nodeName]
		fleet, okFleet := launched[p.nodeName]
		if !okClaim || !okNode || !okFleet || n.ready.IsZero() || n.schedulable.IsZero() || p.bound.IsZero() {
			left++
			continue
		}
		at := p.created
		for i, event := range []time.Time{nc.created, fleet, n.created, n.ready, n.schedulable, p.bound, p.running} {
			end := maxTime(at, event)
			out[podPathSteps[i]] = append(out[podPathSteps[i]], end.Sub(at).Seconds())
			at = end
		}
		out[pathStepsTotal] = append(out[pathStepsTotal], at.Sub(p.created).Seconds())
	}
	return out, left
}

// mean returns the arithmetic mean of samples, NaN for none.
func mean(samples []float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, s := range samples {
		sum += s
	}
	return sum / float64(len(samples))
}

// addPodPath adds, per step of path, its mean and p50 over the pods, then
// the mean of their totals, noting how many pods were counted and left
// out.
func addPodPath(res *Results, path map[string][]float64, left int) {
	for _, step := range podPathSteps {
		res.add("burst, per pod: "+step+" mean / p50", "s", mean(path[step]), fmt.Sprintf("p50 %.2f s", percentile(path[step], 50)))
	}
	total := path[pathStepsTotal]
	res.add("burst, per pod: "+pathStepsTotal+" mean (the steps' sum)", "s", mean(total), fmt.Sprintf("%d pods, %d left out", len(total), left))
}
