package headtohead

import (
	"testing"
)

func TestSplitBind(t *testing.T) {
	nodes := map[string]nodeRecord{
		"node-a": {name: "node-a", ready: at(10), registered: at(10.5), schedulable: at(11)},
		// Untainted before the watch saw it Ready: 0, not negative.
		"node-b": {name: "node-b", ready: at(20), registered: at(19), schedulable: at(19.5)},
		// Registered, but never without blocking taints: left out of
		// the later steps, and so are its pods.
		"node-c": {name: "node-c", ready: at(30), registered: at(32)},
		// Not launched in the burst: left out.
		"node-d": {name: "node-d", ready: at(1), schedulable: at(1)},
	}
	launched := map[string]bool{"node-a": true, "node-b": true, "node-c": true}
	pods := []podRecord{
		// Created before its Node was schedulable: from schedulable.
		{name: "p1", workload: "burst", nodeName: "node-a", created: at(0), bound: at(14), running: at(15)},
		// Created after: from its creation.
		{name: "p2", workload: "burst", nodeName: "node-b", created: at(25), bound: at(27), running: at(33)},
		{name: "p3", workload: "burst", nodeName: "node-c", created: at(0), bound: at(31), running: at(32)},
		{name: "p4", workload: "burst", nodeName: "node-d", created: at(0), bound: at(2), running: at(3)},
		// Not Running yet, another workload, not bound: left out.
		{name: "p5", workload: "burst", nodeName: "node-a", created: at(0), bound: at(12)},
		{name: "p6", workload: "p5", nodeName: "node-a", created: at(0), bound: at(12), running: at(13)},
		{name: "p7", workload: "burst", created: at(0)},
	}
	got := SplitBind(pods, nodes, launched, "burst")
	want := map[string][]float64{
		bindStepRegistered: {0, 0.5, 2},
		bindStepTaints:     {0, 1},
		bindStepScheduler:  {2, 3},
		bindStepKubelet:    {1, 6},
	}
	if len(want) != len(bindSteps) {
		t.Fatalf("the test wants %d steps, SplitBind has %d", len(want), len(bindSteps))
	}
	checkSteps(t, got, want)
	res := &Results{}
	addBindSplit(res, got)
	checkFigure(t, res, "burst: pod bound → Running (launched nodes) p99", 6)
	checkFigure(t, res, "burst: Node Ready → karpenter.sh/unregistered gone (launched nodes) p99", 2)
	checkFigure(t, res, "burst: Node Ready → taints gone (launched nodes) p50", 0)
	if len(res.Figures) != 2*len(bindSteps) {
		t.Errorf("%d figures, want %d", len(res.Figures), 2*len(bindSteps))
	}
}
