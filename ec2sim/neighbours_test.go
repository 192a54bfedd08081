package ec2sim

import (
	"testing"
	"time"

	"github.com/karpx/karpx/catalog/awsquota"
)

// TestNeighboursTakeTheirShare: with neighbours at 60%, a bucket of 50
// tokens refilled at 5/s leaves 20 tokens and 2/s.
func TestNeighboursTakeTheirShare(t *testing.T) {
	th := newThrottler(ThrottleConfig{Neighbours: 0.6,
		Categories: map[ThrottleCategory]Bucket{awsquota.Mutating: {Size: 50, RefillPerSecond: 5}}}.withDefaults())
	now := t0
	allowed := 0
	for range 50 {
		if th.allow("CreateFleet", awsquota.Mutating, false, now) {
			allowed++
		}
	}
	if allowed != 20 {
		t.Fatalf("burst: %d calls allowed, want 20 (40%% of 50)", allowed)
	}
	now = now.Add(10 * time.Second)
	allowed = 0
	for range 50 {
		if th.allow("CreateFleet", awsquota.Mutating, false, now) {
			allowed++
		}
	}
	if allowed != 20 {
		t.Fatalf("after 10 s: %d calls allowed, want 20 (2/s for 10 s)", allowed)
	}
	now = now.Add(time.Second)
	allowed = 0
	for range 5 {
		if th.allow("CreateFleet", awsquota.Mutating, false, now) {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("after 1 s: %d calls allowed, want 2", allowed)
	}
}

func TestNeighboursValidated(t *testing.T) {
	for _, bad := range []float64{-0.1, 1, 2} {
		if _, err := New(Config{Throttle: ThrottleConfig{Neighbours: bad}}); err == nil {
			t.Errorf("Neighbours %v accepted", bad)
		}
	}
	// A tiny bucket keeps one token.
	if got := (ThrottleConfig{Neighbours: 0.9}).leftByNeighbours(Bucket{Size: 5, RefillPerSecond: 2}); got.Size != 1 {
		t.Errorf("leftByNeighbours = %+v, want size 1", got)
	}
}
