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
