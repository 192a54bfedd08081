package headtohead

import (
	"testing"
	"time"
)

// OldestNotRunning looks only at the workload's live pods that are not
// Running, and reports the oldest one's age at the given time.
func TestOldestNotRunning(t *testing.T) {
	end := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	s := Snapshot{Pods: []podRecord{
		{name: "running", workload: "burst", created: end.Add(-time.Hour), running: end.Add(-50 * time.Minute)},
		{name: "deleted", workload: "burst", created: end.Add(-time.Hour), deleted: end.Add(-time.Minute)},
		{name: "other-workload", workload: "drift", created: end.Add(-time.Hour)},
		{name: "moved", workload: "burst", created: end.Add(-1500 * time.Millisecond)},
		{name: "moved-earlier", workload: "burst", created: end.Add(-4 * time.Second)},
	}}
	if got, want := s.OldestNotRunning("burst", end), 4*time.Second; got != want {
		t.Fatalf("OldestNotRunning = %s, want %s", got, want)
	}
	s.Pods = s.Pods[:3]
	if got := s.OldestNotRunning("burst", end); got != 0 {
		t.Fatalf("every live burst pod Running: OldestNotRunning = %s, want 0", got)
	}
}

// LastNodeChange takes the newest creation or deletion of the NodePool's
// Nodes after since, ignores other NodePools' and unowned Nodes and what
// happened before since, and returns since when nothing changed.
func TestLastNodeChange(t *testing.T) {
	start := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	s := Snapshot{Nodes: []nodeRecord{
		{name: "kept", nodePool: "burst", created: at(-time.Hour)},
		{name: "removed", nodePool: "burst", created: at(-time.Hour), deleted: at(40 * time.Second)},
		{name: "replacement", nodePool: "burst", created: at(55 * time.Second)},
		{name: "other-pool", nodePool: "p5", created: at(2 * time.Minute)},
		{name: "probe", created: at(3 * time.Minute), deleted: at(4 * time.Minute)},
	}}
	if got, want := s.LastNodeChange("burst", start), at(55*time.Second); !got.Equal(want) {
		t.Fatalf("LastNodeChange = %s, want the replacement's creation %s", got, want)
	}
	s.Nodes = append(s.Nodes, nodeRecord{name: "replacement-removed", nodePool: "burst", created: at(10 * time.Second), deleted: at(70 * time.Second)})
	if got, want := s.LastNodeChange("burst", start), at(70*time.Second); !got.Equal(want) {
		t.Fatalf("LastNodeChange = %s, want the newest deletion %s", got, want)
	}
	if got := s.LastNodeChange("burst", at(time.Hour)); !got.Equal(at(time.Hour)) {
		t.Fatalf("nothing changed after since: LastNodeChange = %s, want since %s", got, at(time.Hour))
	}
}
