package headtohead

import (
	"math"
	"testing"
	"time"
)

func TestPodPath(t *testing.T) {
	claims := map[string]nodeClaimRecord{
		"node-a": {name: "nc-a", nodeName: "node-a", created: at(2)},
		"node-b": {name: "nc-b", nodeName: "node-b", created: at(3)},
		// Its Node was never untainted: its pod is left out.
		"node-c": {name: "nc-c", nodeName: "node-c", created: at(1)},
	}
	nodes := map[string]nodeRecord{
		"node-a": {name: "node-a", created: at(9), ready: at(10), schedulable: at(11)},
		"node-b": {name: "node-b", created: at(8), ready: at(9), schedulable: at(9.5)},
		"node-c": {name: "node-c", created: at(6), ready: at(7)},
		// Not launched in the burst (no NodeClaim, no CreateFleet time).
		"node-d": {name: "node-d", created: at(0), ready: at(0), schedulable: at(0)},
	}
	launched := map[string]time.Time{"node-a": at(4), "node-b": at(3.5), "node-c": at(1.5)}
	pods := []podRecord{
		// Every step in order: 2, 2, 5, 1, 1, 2, 1.
		{name: "p1", workload: "burst", nodeName: "node-a", created: at(0), bound: at(13), running: at(14)},
		// Created after its Node was schedulable: the launch steps count
		// 0 and the scheduler's step starts at its creation.
		{name: "p2", workload: "burst", nodeName: "node-b", created: at(20), bound: at(21), running: at(23)},
		{name: "p3", workload: "burst", nodeName: "node-c", created: at(0), bound: at(8), running: at(9)},
		{name: "p4", workload: "burst", nodeName: "node-d", created: at(0), bound: at(1), running: at(2)},
		// Not Running, another workload: not counted, not left out.
		{name: "p5", workload: "burst", nodeName: "node-a", created: at(0), bound: at(13)},
		{name: "p6", workload: "p5", nodeName: "node-a", created: at(0), bound: at(13), running: at(14)},
	}
	got, left := PodPath(pods, claims, nodes, launched, "burst")
	if left != 2 {
		t.Errorf("left out %d pods, want 2 (p3 on an untainted-never Node, p4 on a Node not launched)", left)
	}
	want := map[string][]float64{
		pathDecision:   {2, 0},
		pathLaunch:     {2, 0},
		pathRegister:   {5, 0},
		pathReady:      {1, 0},
		pathTaints:     {1, 0},
		pathScheduler:  {2, 1},
		pathKubelet:    {1, 2},
		pathStepsTotal: {14, 3},
	}
	if len(want) != len(podPathSteps)+1 {
		t.Fatalf("the test wants %d steps, PodPath has %d and the total", len(want)-1, len(podPathSteps))
	}
	checkSteps(t, got, want)
	for i := range got[pathStepsTotal] {
		sum := 0.0
		for _, step := range podPathSteps {
			sum += got[step][i]
		}
		if math.Abs(sum-got[pathStepsTotal][i]) > 1e-9 {
			t.Errorf("pod %d: steps add up to %.3f s, its total is %.3f s", i, sum, got[pathStepsTotal][i])
		}
	}
	res := &Results{}
	addPodPath(res, got, left)
	checkFigure(t, res, "burst, per pod: CreateFleet issued → Node registered mean / p50", 2.5)
	checkFigure(t, res, "burst, per pod: pending → Running mean (the steps' sum)", 8.5)
	f, _ := res.find("burst, per pod: pending → Running mean (the steps' sum)")
	if f.Note != "2 pods, 2 left out" {
		t.Errorf("total's note %q, want %q", f.Note, "2 pods, 2 left out")
	}
	if len(res.Figures) != len(podPathSteps)+1 {
		t.Errorf("%d figures, want %d", len(res.Figures), len(podPathSteps)+1)
	}
	if empty := mean(nil); !math.IsNaN(empty) {
		t.Errorf("mean of no samples %v, want NaN", empty)
	}
}
