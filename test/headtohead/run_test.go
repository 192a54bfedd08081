package headtohead

import (
	"testing"
	"time"
)

// windowsTotal counts each request once: the consolidation's fixed window,
// which lies inside the consolidation until settled, is skipped, and a
// request between two windows counts in neither.
func TestWindowsTotal(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	req := func(s int, verb, resource string) Request {
		return Request{At: at(s), Verb: verb, Resource: resource}
	}
	reqs := []Request{
		req(1, "create", "nodeclaims"),        // burst
		req(12, "patch", "nodeclaims/status"), // consolidation, in the fixed window
		req(40, "create", "pods/eviction"),    // consolidation, after the fixed window
		req(75, "get", "nodes"),               // between the settled point and drift
		req(80, "patch", "nodes"),             // drift
		req(200, "delete", "nodeclaims"),      // after every window
	}
	windows := []window{
		{name: "burst", from: at(0), to: at(10)},
		{name: "consolidation", from: at(10), to: at(30), overlaps: true},
		{name: "consolidation until settled", from: at(10), to: at(70)},
		{name: "drift", from: at(78), to: at(100)},
	}
	byKey, total := windowsTotal(reqs, windows)
	if total != 4 {
		t.Errorf("total = %d, want 4 (burst 1, consolidation until settled 2, drift 1; the fixed window not again)", total)
	}
	want := map[string]int{"create nodeclaims": 1, "patch nodeclaims/status": 1, "create pods/eviction": 1, "patch nodes": 1}
	for k, v := range want {
		if byKey[k] != v {
			t.Errorf("byKey[%q] = %d, want %d (all: %v)", k, byKey[k], v, byKey)
		}
	}
	if len(byKey) != len(want) {
		t.Errorf("byKey = %v, want only %v", byKey, want)
	}
}

// consolidated counts the Nodes of before that are gone or being deleted,
// and the evictions: burst pods of ReplicaSets not deleted on purpose,
// deleted since start.
func TestConsolidated(t *testing.T) {
	start := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	before := []nodeRecord{{name: "a", nodePool: PoolName}, {name: "b", nodePool: PoolName}, {name: "c", nodePool: PoolName}}
	s := Snapshot{
		Nodes: []nodeRecord{
			{name: "a", nodePool: PoolName},
			{name: "b", nodePool: PoolName, deleted: start.Add(time.Minute)},
			{name: "replacement", nodePool: PoolName, created: start.Add(time.Minute)},
		},
		Pods: []podRecord{
			{name: "evicted", workload: "burst", owner: "kept", deleted: start.Add(30 * time.Second)},
			{name: "deleted-on-purpose", workload: "burst", owner: "gone", deleted: start.Add(time.Second)},
			{name: "deleted-before", workload: "burst", owner: "kept", deleted: start.Add(-time.Second)},
			{name: "running", workload: "burst", owner: "kept"},
			{name: "other-workload", workload: "p5", owner: "kept", deleted: start.Add(time.Second)},
		},
	}
	removed, evicted := consolidated(s, s.LiveNodes(PoolName), before, map[string]bool{"gone": true}, start)
	if removed != 2 || evicted != 1 {
		t.Fatalf("consolidated = %d removed, %d evicted; want 2 (b being deleted, c gone), 1", removed, evicted)
	}
}
