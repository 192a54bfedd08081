package headtohead

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/karpx/karpx/ec2sim"
)

func TestDecompose(t *testing.T) {
	claims := map[string]nodeClaimRecord{
		"node-a": {name: "nc-a", nodeName: "node-a", created: at(0)},
		"node-b": {name: "nc-b", nodeName: "node-b", created: at(10)},
		"node-c": {name: "nc-c", nodeName: "node-c", created: at(0)},
	}
	nodes := map[string]nodeRecord{
		"node-a": {name: "node-a", created: at(6), ready: at(7)},
		"node-b": {name: "node-b", created: at(20), ready: at(22)},
		// node-c never became Ready: left out.
		"node-c": {name: "node-c", created: at(6)},
	}
	instances := []ec2sim.Instance{
		{ID: "i-a", NodeName: "node-a", LaunchTime: at(1)},
		{ID: "i-b", NodeName: "node-b", LaunchTime: at(13)},
		{ID: "i-c", NodeName: "node-c", LaunchTime: at(1)},
		// Not joined, or joined as a Node no NodeClaim names: left out.
		{ID: "i-d", LaunchTime: at(1)},
		{ID: "i-e", NodeName: "node-e", LaunchTime: at(1)},
	}
	d := Decompose(claims, nodes, instances, 500*time.Millisecond)
	want := map[string][]float64{
		"CreateFleet issued": {1, 3},
		"instance running":   {1.5, 3.5},
		"Node registered":    {6, 10},
		"Node Ready":         {7, 12},
	}
	checkSteps(t, d, want)
	res := &Results{}
	addDecomposition(res, d)
	checkFigure(t, res, "burst: NodeClaim created → Node Ready p99", 12)
	checkFigure(t, res, "burst: NodeClaim created → CreateFleet issued p50", 1)
	if len(res.Figures) != 2*len(launchSteps) {
		t.Errorf("%d figures, want %d", len(res.Figures), 2*len(launchSteps))
	}
}

// checkSteps fails t unless got holds, for every step of want, the same
// durations (seconds, within 1e-9) in any order: percentiles do not
// depend on it.
func checkSteps(t *testing.T, got, want map[string][]float64) {
	t.Helper()
	for step, w := range want {
		g := slices.Sorted(slices.Values(got[step]))
		w = slices.Sorted(slices.Values(w))
		if len(g) != len(w) {
			t.Fatalf("%s: %v, want %v", step, g, w)
		}
		for i := range w {
			if math.Abs(g[i]-w[i]) > 1e-9 {
				t.Errorf("%s: %v, want %v", step, g, w)
			}
		}
	}
}

// at returns the moment s seconds after a fixed start, the recorder's
// watch times of the tests' fixtures.
func at(s float64) time.Time {
	return time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
}

// checkFigure fails t unless res has the figure named name with value want.
func checkFigure(t *testing.T, res *Results, name string, want float64) {
	t.Helper()
	if f, ok := res.find(name); !ok || f.Value != want {
		t.Errorf("%s: %+v, found %v; want %v", name, f, ok, want)
	}
}
