package launchhealth

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestPauseAfterThresholdAndBackoffGrows(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	tr := New(Options{Clock: clk, Jitter: func() float64 { return 1 }})
	key := Key{NodePool: "bad", NodeClass: "bad"}
	gens := Generations{NodePool: 1, NodeClass: 1}

	for i := 1; i < DefaultThreshold; i++ {
		tr.Failure(key, gens, "RegistrationTimeout", "never joined")
		if paused, _ := tr.Paused(key, gens); paused {
			t.Fatalf("paused after %d failures, threshold is %d", i, DefaultThreshold)
		}
	}
	s := tr.Failure(key, gens, "RegistrationTimeout", "never joined")
	if paused, _ := tr.Paused(key, gens); !paused || s.PausedUntil.Sub(now) != DefaultBaseBackoff {
		t.Fatalf("after %d failures: paused=%v until +%s, want paused for %s", s.Consecutive, paused, s.PausedUntil.Sub(now), DefaultBaseBackoff)
	}
	s = tr.Failure(key, gens, "RegistrationTimeout", "never joined")
	if got := s.PausedUntil.Sub(now); got != 2*DefaultBaseBackoff {
		t.Fatalf("4th failure pauses for %s, want %s", got, 2*DefaultBaseBackoff)
	}
	for range 20 {
		s = tr.Failure(key, gens, "RegistrationTimeout", "never joined")
	}
	if got := s.PausedUntil.Sub(now); got != DefaultMaxBackoff {
		t.Fatalf("pause %s, want the cap %s", got, DefaultMaxBackoff)
	}
	now = now.Add(DefaultMaxBackoff + time.Second)
	clk.SetTime(now)
	if paused, _ := tr.Paused(key, gens); paused {
		t.Fatal("still paused after the backoff expired")
	}
	if unhealthy, _ := tr.Unhealthy(key, gens); !unhealthy {
		t.Fatal("healthy again after the pause expired, without any registration")
	}
}

func TestDifferentCauseRestartsCount(t *testing.T) {
	tr := New(Options{Jitter: func() float64 { return 1 }})
	key, gens := Key{"p", "c"}, Generations{1, 1}
	tr.Failure(key, gens, "A", "")
	tr.Failure(key, gens, "A", "")
	if s := tr.Failure(key, gens, "B", ""); s.Consecutive != 1 {
		t.Fatalf("consecutive = %d after a new cause, want 1", s.Consecutive)
	}
}

func TestSpecChangeEndsPause(t *testing.T) {
	tr := New(Options{Jitter: func() float64 { return 1 }})
	key, gens := Key{"p", "c"}, Generations{1, 1}
	for range DefaultThreshold {
		tr.Failure(key, gens, "A", "")
	}
	if paused, _ := tr.Paused(key, gens); !paused {
		t.Fatal("not paused")
	}
	if paused, _ := tr.Paused(key, Generations{1, 2}); paused {
		t.Fatal("still paused after the EC2NodeClass changed")
	}
	// The failures were forgotten, not just hidden: asked again with the
	// old generations, the pair is no longer unhealthy.
	if unhealthy, _ := tr.Unhealthy(key, gens); unhealthy {
		t.Fatal("state kept after a spec change")
	}
}

func TestSuccessForgets(t *testing.T) {
	tr := New(Options{})
	key, gens := Key{"p", "c"}, Generations{1, 1}
	for range DefaultThreshold {
		tr.Failure(key, gens, "A", "")
	}
	tr.Success(key)
	if paused, _ := tr.Paused(key, gens); paused {
		t.Fatal("paused after a success")
	}
}

func TestBackoffDoublesToCap(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 10: 10 * time.Minute, 100: 10 * time.Minute} {
		if got := Backoff(30*time.Second, 10*time.Minute, attempt); got != want {
			t.Errorf("Backoff(attempt %d) = %s, want %s", attempt, got, want)
		}
	}
}
