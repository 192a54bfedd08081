package headtohead

import (
	"time"

	"github.com/karpx/karpx/ec2sim"
)

// launchSteps are the steps from a NodeClaim's creation to its Node Ready
// on an ec2sim side, in order, as the table names them.
var launchSteps = []string{"CreateFleet issued", "instance running", "Node registered", "Node Ready"}

// Decomposition holds, per launch step (launchSteps), the seconds from
// each NodeClaim's creation (as the recorder's watch saw it) to that step
// for its instance: CreateFleet issued is the instance's LaunchTime
// (ec2sim stamps it with the CreateFleet request's arrival), instance
// running is LaunchTime + pending (ec2sim derives "running" from it), Node
// registered and Node Ready are when the recorder saw the Node created and
// Ready. Only NodeClaims whose instance and Ready Node were both seen
// count.
type Decomposition map[string][]float64

// Decompose joins NodeClaims (keyed by Node name), their Nodes (keyed by
// name) and ec2sim's instances (through Instance.NodeName) into a
// Decomposition; pending is the simulator's PendingDelay.
func Decompose(claims map[string]nodeClaimRecord, nodes map[string]nodeRecord, instances []ec2sim.Instance, pending time.Duration) Decomposition {
	d := Decomposition{}
	for _, in := range instances {
		if in.NodeName == "" {
			continue
		}
		nc, ok := claims[in.NodeName]
		n, okNode := nodes[in.NodeName]
		if !ok || !okNode || n.ready.IsZero() {
			continue
		}
		for i, at := range []time.Time{in.LaunchTime, in.LaunchTime.Add(pending), n.created, n.ready} {
			d[launchSteps[i]] = append(d[launchSteps[i]], at.Sub(nc.created).Seconds())
		}
	}
	return d
}

// addDecomposition adds d's p50 and p99 per step to res.
func addDecomposition(res *Results, d Decomposition) {
	for _, step := range launchSteps {
		res.add("burst: NodeClaim created → "+step+" p50", "s", percentile(d[step], 50), "")
		res.add("burst: NodeClaim created → "+step+" p99", "s", percentile(d[step], 99), "")
	}
}
