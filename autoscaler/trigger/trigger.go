package trigger

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Trigger wakes a controller's pass loop. Fire and FireFor never block; the
// loop receives from C, and any number of fires before it receives wake it
// once. A controller that batches calls Batch after each wake-up.
type Trigger struct {
	c   chan struct{}
	clk clock.WithTicker
	// window holds the objects that fired in the open batch window.
	window window
}

// New returns a Trigger whose batch windows are timed by clk (a fake clock
// in tests).
func New(clk clock.WithTicker) *Trigger {
	return &Trigger{c: make(chan struct{}, 1), clk: clk}
}

// C is the channel a wake-up is received on.
func (t *Trigger) C() <-chan struct{} { return t.c }

// Fire asks for a pass soon, on behalf of no particular object (it does not
// extend a batch window); it never blocks.
func (t *Trigger) Fire() {
	select {
	case t.c <- struct{}{}:
	default:
	}
}

// FireFor asks for a pass on behalf of key, the object whose event caused it
// (e.g. "pod default/web"); it never blocks. Only the first fire of each key
// in a batch window wakes the controller and restarts the window's idle
// timer, as Karpenter's provisioning Batcher counts each pod UID once per
// window: the kube-scheduler rewrites a pending pod's PodScheduled message
// whenever a Node joins or changes, and each rewrite is a new event of the
// same pod, which would otherwise hold the window open one more idle
// duration (a single pending pod then waited 2 s instead of 1 s whenever
// another node was registering).
func (t *Trigger) FireFor(key string) {
	if t.window.add(key, t.clk.Now()) {
		t.Fire()
	}
}

// Batch is called after a wake-up: it waits until no new key fired for idle
// or maxDuration passed since it was called (windowEnd), and returns false
// when ctx ended first. A new key only moves the window's end later, so
// the timer is re-armed when it fires, for what is left; wake-ups that
// arrive meanwhile are drained, so they do not open another window after
// the pass that includes them. The window's keys are forgotten when it
// returns, so a fire from then on (an object that changes during the pass)
// opens the next window.
func (t *Trigger) Batch(ctx context.Context, idle, maxDuration time.Duration) bool {
	defer t.window.close()
	opened := t.clk.Now()
	timer := t.clk.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.c:
			continue
		case <-timer.C():
		}
		now := t.clk.Now()
		end := windowEnd(opened, t.window.lastNew(), idle, maxDuration)
		if !now.Before(end) {
			return true
		}
		timer.Reset(end.Sub(now))
	}
}
