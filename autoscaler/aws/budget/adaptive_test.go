package budget_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/catalog/awsquota"
	"github.com/karpx/karpx/ec2sim"
)

// TestAdaptiveSlowsDownAndRecovers: a throttled answer halves the bucket of
// its action (once per hold time, however many answers report the same
// congestion) and drops its tokens; other actions keep their rate; the
// bucket comes back to its configured rate after the recovery time. The
// budget runs on a pacedClock: the retry after the throttled answers waits
// for the emptied bucket in simulated time only.
func TestAdaptiveSlowsDownAndRecovers(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	clk := newPacedClock()
	api := newLimited(t, e, budget.Options{Clock: clk, AdaptiveHold: time.Hour, AdaptiveRecovery: time.Hour, AdaptiveStart: 1})
	if err := e.Sim.Faults().FailNext("DescribeSubnets", "RequestLimitExceeded", 2); err != nil {
		t.Fatal(err)
	}
	if err := clk.run(func() error {
		_, err := api.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, fastRetries(3))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st := api.Snapshot()
	subnets := actionOf(t, st, "DescribeSubnets", awsquota.NonMutating)
	// An hour's recovery moves the factor by about 1e-4 per second.
	if a := subnets.Adaptive; math.Abs(a.Factor-0.5) > 0.01 || a.Size != 25 || math.Abs(a.RefillPerSecond-5) > 0.1 || a.Slowdowns != 1 || a.LastSlowdown == nil {
		t.Errorf("DescribeSubnets adaptive %+v, want factor 0.5, 25 tokens at 5/s, 1 slow-down", a)
	}
	if subnets.Tokens > 1 {
		t.Errorf("DescribeSubnets has %.1f tokens after a throttled answer, want the bucket emptied", subnets.Tokens)
	}
	if a := actionOf(t, st, "DescribeImages", awsquota.NonMutating).Adaptive; a.Factor != 1 || a.Size != 50 || a.Slowdowns != 0 {
		t.Errorf("DescribeImages adaptive %+v, want untouched", a)
	}
	for _, c := range st.Categories {
		if c.Category == awsquota.NonMutating && (math.Abs(c.AdaptiveFactor-0.5) > 0.01 || c.Slowdowns != 1) {
			t.Errorf("category %+v, want factor 0.5 and 1 slow-down", c)
		}
	}

	clk = newPacedClock()
	fast := newLimited(t, e, budget.Options{Clock: clk, AdaptiveRecovery: 2 * time.Second, AdaptiveStart: 1})
	if err := e.Sim.Faults().FailNext("DescribeSubnets", "RequestLimitExceeded", 1); err != nil {
		t.Fatal(err)
	}
	throttledAt := clk.Now()
	if err := clk.run(func() error {
		_, err := fast.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, fastRetries(3))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if a := actionOf(t, fast.Snapshot(), "DescribeSubnets", awsquota.NonMutating).Adaptive; a.Factor >= 0.9 || a.Slowdowns != 1 {
		t.Fatalf("no slow-down: %+v", a)
	}
	clk.SetTime(throttledAt.Add(2 * time.Second))
	if a := actionOf(t, fast.Snapshot(), "DescribeSubnets", awsquota.NonMutating).Adaptive; a.Factor != 1 || a.Size != 50 {
		t.Errorf("after the recovery time: %+v, want factor 1 and 50 tokens", a)
	}
}

// TestAdaptiveLearnsNeighboursShare: neighbours use 60% of every bucket of
// the account, so a fixed half of AWS's rates is too much. 200 calls in a
// row at the fixed budget are throttled again and again; the adaptive
// budget is throttled once and then stays below the share left. The
// simulator and the budget share a fake clock (pacedClock) that moves
// 5 ms per call and, while the budget holds a call back, to the moment
// it lets the call go: the outcome depends on no machine's speed.
func TestAdaptiveLearnsNeighboursShare(t *testing.T) {
	// Buckets 10 times faster than AWS's: 200 calls take about a second.
	fastAWS := awsquota.Bucket{Size: 100, RefillPerSecond: 200}
	run := func(adaptiveOff bool) (throttled, failed int64) {
		clk := newPacedClock()
		e := ec2apitest.Start(t, ec2sim.Config{Clock: clk, Throttle: ec2sim.ThrottleConfig{Neighbours: 0.6,
			Categories: map[ec2sim.ThrottleCategory]ec2sim.Bucket{awsquota.NonMutating: fastAWS}}}, ec2api.Config{})
		api := newLimited(t, e, budget.Options{Clock: clk, AdaptiveDisabled: adaptiveOff, AdaptiveRecovery: time.Hour, AdaptiveStart: 1,
			Buckets: map[awsquota.Category]awsquota.Bucket{awsquota.NonMutating: fastAWS}})
		for i := range 200 {
			clk.Step(5 * time.Millisecond)
			err := clk.run(func() error {
				_, err := api.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{}, fastRetries(3))
				return err
			})
			if err != nil {
				if !adaptiveOff {
					t.Fatalf("call %d: %v", i, err)
				}
				failed++
			}
		}
		st := actionOf(t, api.Snapshot(), "DescribeAvailabilityZones", awsquota.NonMutating)
		if st.QuotaErrors != 0 {
			t.Errorf("adaptiveOff=%v: %d retry-quota errors", adaptiveOff, st.QuotaErrors)
		}
		return st.Throttled, failed
	}
	fixed, fixedFailed := run(true)
	adaptive, _ := run(false)
	t.Logf("200 calls with neighbours at 60%%: fixed budget throttled %d times (%d calls failed), adaptive %d (0 failed)", fixed, fixedFailed, adaptive)
	if adaptive != 1 {
		t.Errorf("adaptive budget throttled %d times, want exactly 1 (the answer it learns from)", adaptive)
	}
	if fixed < 5 {
		t.Errorf("fixed budget throttled %d times: the scenario does not need adaptation", fixed)
	}
}

// pacedClock is a fake clock for a test with one caller at a time: it
// records the budget's dispatch timers, so that run can move the time to
// the moment a held-back call is let go, and nothing else moves it.
type pacedClock struct {
	*testingclock.FakeClock
	// mu orders arming a timer and moving the time, so that a recorded
	// deadline is the one the fake clock fires at.
	mu      sync.Mutex
	pending []time.Time // AfterFunc deadlines not yet stepped past
}

func newPacedClock() *pacedClock {
	return &pacedClock{FakeClock: newFakeClock()}
}

// AfterFunc records the deadline, for run, and arms the fake clock's timer.
func (c *pacedClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, c.Now().Add(d))
	return c.FakeClock.AfterFunc(d, f)
}

// Step moves the time by d (see mu).
func (c *pacedClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.FakeClock.Step(d)
}

// SetTime moves the time to at (see mu).
func (c *pacedClock) SetTime(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.FakeClock.SetTime(at)
}

// run calls call and, while it has not returned and the budget holds it
// back (a dispatch timer is pending), steps the time to the earliest
// pending deadline. A call the budget lets through is not waited on by
// the clock: the HTTP exchange takes no simulated time.
func (c *pacedClock) run(call func() error) error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Millisecond):
		}
		now := c.Now()
		c.mu.Lock()
		var next time.Time
		kept := c.pending[:0]
		for _, at := range c.pending {
			if at.After(now) {
				kept = append(kept, at)
				if next.IsZero() || at.Before(next) {
					next = at
				}
			}
		}
		c.pending = kept
		if !next.IsZero() {
			c.FakeClock.SetTime(next)
		}
		c.mu.Unlock()
	}
}

// TestAdaptiveSlowStart: a new budget starts at half its configured share
// and grows to all of it over the recovery time.
func TestAdaptiveSlowStart(t *testing.T) {
	clk := newFakeClock()
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{Clock: clk, AdaptiveRecovery: time.Second})
	a := actionOf(t, api.Snapshot(), "CreateFleet", awsquota.Mutating)
	if a.Adaptive.Factor != budget.DefaultAdaptiveStart || a.Adaptive.Size != 12 || a.Tokens != 12 || a.Adaptive.LastSlowdown != nil {
		t.Errorf("new CreateFleet bucket %+v, want the slow start's 12 of 25 tokens", a)
	}
	clk.Step(time.Second / 2)
	if a := actionOf(t, api.Snapshot(), "CreateFleet", awsquota.Mutating); a.Adaptive.Factor != 0.75 || a.Adaptive.Size != 18 {
		t.Errorf("half-way through the recovery time: %+v, want factor 0.75 and 18 tokens", a.Adaptive)
	}
	clk.Step(time.Second / 2)
	if a := actionOf(t, api.Snapshot(), "CreateFleet", awsquota.Mutating); a.Adaptive.Factor != 1 || a.Adaptive.Size != 25 {
		t.Errorf("after the recovery time: %+v, want all 25 tokens", a.Adaptive)
	}
}

// TestAdaptiveSlowStartGrowsWithAnswers: in its slow start a bucket grows
// with every answer AWS gives without throttling, tokens included, so a
// burst right after the start is not held to the slow start's quarter of
// AWS's rate for the whole recovery time (issue 29: a hundred CreateFleet
// calls waited up to 28 s for it), up to the answers' ceiling; a
// throttled answer ends that growth. The clock never moves: every token
// here comes from answers.
func TestAdaptiveSlowStartGrowsWithAnswers(t *testing.T) {
	clk := newFakeClock()
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{Clock: clk, AdaptiveRecovery: time.Hour})
	a := actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating)
	if a.Adaptive.Factor != budget.DefaultAdaptiveStart || a.Tokens != 25 {
		t.Fatalf("new DescribeSubnets bucket %+v, want the slow start's 25 of 50 tokens", a)
	}
	// 25 tokens at the start and half a token more per answer, up to the
	// answers' ceiling (0.75 of 50 tokens): 37 calls go without waiting on
	// a clock that does not move (without the growth, the 26th would wait;
	// without the ceiling, the 49th), and the 38th would wait.
	const calls = 37
	for i := range calls {
		if a := actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating); a.Tokens < 1 {
			t.Fatalf("call %d of %d would wait: %+v", i+1, calls, a)
		}
		if _, err := api.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}); err != nil {
			t.Fatal(err)
		}
	}
	a = actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating)
	if a.Tokens >= 1 || math.Abs(a.Adaptive.Factor-budget.AdaptiveAnswerCeiling) > 1e-9 || a.Adaptive.Size != 37 || a.Adaptive.Slowdowns != 0 {
		t.Errorf("after %d unthrottled answers: %+v, want no token left, factor 0.75 (the answers' ceiling), 37 tokens, no slow-down", calls, a)
	}
	if a := actionOf(t, api.Snapshot(), "DescribeImages", awsquota.NonMutating).Adaptive; a.Factor != budget.DefaultAdaptiveStart {
		t.Errorf("DescribeImages adaptive %+v, want its own slow start untouched", a)
	}

	// A throttled answer ends the growth: the retry's unthrottled answer
	// leaves the halved factor as it is.
	pc := newPacedClock()
	throttled := newLimited(t, e, budget.Options{Clock: pc, AdaptiveRecovery: time.Hour})
	if err := e.Sim.Faults().FailNext("DescribeSubnets", "RequestLimitExceeded", 1); err != nil {
		t.Fatal(err)
	}
	if err := pc.run(func() error {
		_, err := throttled.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, fastRetries(3))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// An hour's recovery moves the factor by about 1e-4 per second.
	if a := actionOf(t, throttled.Snapshot(), "DescribeSubnets", awsquota.NonMutating).Adaptive; math.Abs(a.Factor-0.25) > 0.01 || a.Slowdowns != 1 {
		t.Errorf("after a throttled answer and its retry: %+v, want factor 0.25 (the slow start's 0.5 halved) and 1 slow-down", a)
	}
}

// TestAdaptiveIdleBucketFillsAsItGrows: a bucket that grows back to its
// share while nobody calls (the slow start after the controller started,
// or the recovery after a throttled answer) holds the tokens a bucket of
// the grown size would have refilled meanwhile, up to the answers'
// ceiling (3/4 of its share), so that the first burst after an idle spell
// does not wait for them. The growth is applied lazily, at the next call
// or reading; applied in one jump, it kept the tokens of the smaller
// bucket (12 of CreateFleet's 25 after 2 idle minutes), and a burst of
// launches right after waited for them.
func TestAdaptiveIdleBucketFillsAsItGrows(t *testing.T) {
	pc := newPacedClock()
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{Clock: pc})
	if a := actionOf(t, api.Snapshot(), "CreateFleet", awsquota.Mutating); a.Tokens != 12 || a.Adaptive.Size != 12 {
		t.Fatalf("new CreateFleet bucket %+v, want the slow start's 12 of 25 tokens", a)
	}
	// Half the recovery time (2 minutes by default) with no call and no
	// reading: the factor is 0.75, 18 tokens, and the bucket, refilling
	// at 1.25/s or more, is full at that size.
	pc.Step(budget.DefaultAdaptiveRecovery / 2)
	if a := actionOf(t, api.Snapshot(), "CreateFleet", awsquota.Mutating); a.Adaptive.Size != 18 || a.Tokens != 18 {
		t.Errorf("idle for half the recovery time: %+v, want 18 of 18 tokens", a)
	}
	pc.Step(budget.DefaultAdaptiveRecovery / 2)
	if a := actionOf(t, api.Snapshot(), "CreateFleet", awsquota.Mutating); a.Adaptive.Factor != 1 || a.Tokens != 18 {
		t.Errorf("idle for the recovery time: %+v, want the whole share with 18 of 25 tokens (the answers' ceiling; the rest refills in use)", a)
	}

	// After a throttled answer a bucket is emptied and halved; idle for
	// the recovery time, it is back at its share with the answers' ceiling
	// of tokens (DescribeSubnets: 37 of 50, grown back from its slow start
	// by the readings above).
	if err := e.Sim.Faults().FailNext("DescribeSubnets", "RequestLimitExceeded", 1); err != nil {
		t.Fatal(err)
	}
	if err := pc.run(func() error {
		_, err := api.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, fastRetries(1))
		return err
	}); err == nil {
		t.Fatal("DescribeSubnets answered without the injected RequestLimitExceeded")
	}
	a := actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating)
	if a.Adaptive.Slowdowns != 1 || a.Adaptive.Factor != 0.5 || a.Tokens >= 1 {
		t.Fatalf("after a throttled answer: %+v, want factor 0.5, 1 slow-down, no token left", a)
	}
	pc.Step(budget.DefaultAdaptiveRecovery)
	if a := actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating); a.Adaptive.Factor != 1 || a.Tokens != 37 {
		t.Errorf("idle for the recovery time after the slow-down: %+v, want 37 of 50 tokens", a)
	}
}
