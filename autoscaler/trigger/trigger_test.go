package trigger

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestWindowEnd(t *testing.T) {
	opened := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		last time.Time
		want time.Duration // after opened
	}{
		{name: "only the opening trigger", want: time.Second},
		{name: "newest trigger before the window opened", last: opened.Add(-300 * time.Millisecond), want: time.Second},
		{name: "a new object 600ms in", last: opened.Add(600 * time.Millisecond), want: 1600 * time.Millisecond},
		{name: "capped by the maximum", last: opened.Add(2500 * time.Millisecond), want: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := windowEnd(opened, tc.last, time.Second, 3*time.Second).Sub(opened); got != tc.want {
				t.Errorf("window closes %s after it opened, want %s", got, tc.want)
			}
		})
	}
}

// TestBatchCountsEachObjectOnce runs Batch on a fake clock: only the first
// trigger of each object in a window restarts the idle timer (the
// kube-scheduler rewriting a pending pod's message must not hold the
// window open), a new object does, and the maximum caps the window. Time
// moves in 100ms steps; after each step the test waits until batch has
// either returned or re-armed its timer, so the closing time is exact.
func TestBatchCountsEachObjectOnce(t *testing.T) {
	type trigger struct {
		at  time.Duration // after the window opened
		key string
	}
	for _, tc := range []struct {
		name     string
		triggers []trigger // besides "pod a", which opens the window at 0
		want     time.Duration
	}{
		{name: "nothing else", want: time.Second},
		{name: "the same pod again", triggers: []trigger{{600 * time.Millisecond, "pod a"}}, want: time.Second},
		{name: "another pod", triggers: []trigger{{600 * time.Millisecond, "pod b"}}, want: 1600 * time.Millisecond},
		{name: "another pod rewritten three times", triggers: []trigger{
			{300 * time.Millisecond, "pod b"}, {600 * time.Millisecond, "pod b"}, {900 * time.Millisecond, "pod b"}, {1200 * time.Millisecond, "pod a"},
		}, want: 1300 * time.Millisecond},
		{name: "a new pod every 900ms, capped at 3s", triggers: []trigger{
			{900 * time.Millisecond, "pod b"}, {1800 * time.Millisecond, "pod c"}, {2700 * time.Millisecond, "pod d"},
		}, want: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opened := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(opened)
			tr := New(clk)
			tr.FireFor("pod a")
			<-tr.C() // as the pass loop receives the wake-up that opens the window
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan time.Duration, 1)
			go func() {
				if tr.Batch(ctx, time.Second, 3*time.Second) {
					done <- clk.Since(opened)
				}
			}()
			// settled waits until batch has returned (its elapsed time) or
			// its timer is armed; -1 means it has not returned.
			settled := func() time.Duration {
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					select {
					case d := <-done:
						return d
					default:
					}
					if clk.Waiters() == 1 {
						return -1
					}
					time.Sleep(time.Millisecond)
				}
				t.Fatal("batch neither returned nor re-armed its timer within 10s")
				return 0
			}
			if d := settled(); d >= 0 {
				t.Fatalf("batch returned at once (%s)", d)
			}
			next := 0
			for elapsed := time.Duration(0); elapsed <= 5*time.Second; elapsed += 100 * time.Millisecond {
				for next < len(tc.triggers) && tc.triggers[next].at == elapsed {
					tr.FireFor(tc.triggers[next].key)
					next++
				}
				if elapsed > 0 {
					if d := settled(); d >= 0 {
						if d != tc.want {
							t.Fatalf("window closed %s after it opened, want %s", d, tc.want)
						}
						if n := len(tr.window.keys); n != 0 {
							t.Errorf("%d objects remembered after the window closed, want none", n)
						}
						return
					}
				}
				clk.Step(100 * time.Millisecond)
			}
			t.Fatalf("window still open 5s after it opened, want it closed at %s", tc.want)
		})
	}
}

// TestFireCoalesces: fires before the loop receives wake it once, and a
// fire after it received wakes it again.
func TestFireCoalesces(t *testing.T) {
	tr := New(clocktesting.NewFakeClock(time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)))
	tr.Fire()
	tr.Fire()
	tr.FireFor("pod a")
	wakeups := 0
	for done := false; !done; {
		select {
		case <-tr.C():
			wakeups++
		default:
			done = true
		}
	}
	if wakeups != 1 {
		t.Fatalf("%d wake-ups for three fires before the loop received, want 1", wakeups)
	}
	tr.Fire()
	select {
	case <-tr.C():
	default:
		t.Fatal("no wake-up for a fire after the loop received")
	}
}

// TestFireForSameKeyDoesNotWake: a key that already fired in the open
// window does not wake the loop again; after Batch closes the window it
// does.
func TestFireForSameKeyDoesNotWake(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC))
	tr := New(clk)
	tr.FireFor("pod a")
	<-tr.C()
	tr.FireFor("pod a")
	select {
	case <-tr.C():
		t.Fatal("the same key woke the loop twice in one window")
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tr.Batch(ctx, time.Second, 3*time.Second) {
		t.Fatal("Batch on an ended context returned true")
	}
	tr.FireFor("pod a")
	select {
	case <-tr.C():
	default:
		t.Fatal("a key did not wake the loop after its window closed")
	}
}
