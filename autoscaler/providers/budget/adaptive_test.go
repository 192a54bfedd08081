package budget_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/karpx/karpx/autoscaler/providers/budget"
	"github.com/karpx/karpx/autoscaler/providers/ec2api"
	"github.com/karpx/karpx/autoscaler/providers/ec2api/ec2apitest"
	"github.com/karpx/karpx/ec2sim"
)

// TestAdaptiveSlowsDownAndRecovers: a throttled answer halves the bucket of
// its action (once per hold time, however many answers report the same
// congestion) and drops its tokens; other actions keep their rate; the
// bucket comes back to its configured rate after the recovery time.
func TestAdaptiveSlowsDownAndRecovers(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := budget.New(e.Client, budget.Options{AdaptiveHold: time.Hour, AdaptiveRecovery: time.Hour, AdaptiveStart: 1})
	if err := e.Sim.Faults().FailNext("DescribeSubnets", "RequestLimitExceeded", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := api.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, fastRetries(3)); err != nil {
		t.Fatal(err)
	}
	st := api.Snapshot()
	subnets := actionOf(t, st, "DescribeSubnets", budget.NonMutating)
	// An hour's recovery moves the factor by about 1e-4 per second.
	if a := subnets.Adaptive; math.Abs(a.Factor-0.5) > 0.01 || a.Size != 25 || math.Abs(a.RefillPerSecond-5) > 0.1 || a.Slowdowns != 1 || a.LastSlowdown == nil {
		t.Errorf("DescribeSubnets adaptive %+v, want factor 0.5, 25 tokens at 5/s, 1 slow-down", a)
	}
	if subnets.Tokens > 1 {
		t.Errorf("DescribeSubnets has %.1f tokens after a throttled answer, want the bucket emptied", subnets.Tokens)
	}
	if a := actionOf(t, st, "DescribeImages", budget.NonMutating).Adaptive; a.Factor != 1 || a.Size != 50 || a.Slowdowns != 0 {
		t.Errorf("DescribeImages adaptive %+v, want untouched", a)
	}
	for _, c := range st.Categories {
		if c.Category == budget.NonMutating && (math.Abs(c.AdaptiveFactor-0.5) > 0.01 || c.Slowdowns != 1) {
			t.Errorf("category %+v, want factor 0.5 and 1 slow-down", c)
		}
	}

	fast := budget.New(e.Client, budget.Options{AdaptiveRecovery: 2 * time.Second, AdaptiveStart: 1})
	if err := e.Sim.Faults().FailNext("DescribeSubnets", "RequestLimitExceeded", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := fast.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, fastRetries(3)); err != nil {
		t.Fatal(err)
	}
	if a := actionOf(t, fast.Snapshot(), "DescribeSubnets", budget.NonMutating).Adaptive; a.Factor >= 0.9 {
		t.Fatalf("no slow-down: %+v", a)
	}
	time.Sleep(2100 * time.Millisecond)
	if a := actionOf(t, fast.Snapshot(), "DescribeSubnets", budget.NonMutating).Adaptive; a.Factor != 1 || a.Size != 50 {
		t.Errorf("after the recovery time: %+v, want factor 1 and 50 tokens", a)
	}
}

// TestAdaptiveLearnsNeighboursShare: neighbours use 60% of every bucket of
// the account, so a fixed half of AWS's rates is too much. 200 calls in a
// row at the fixed budget are throttled again and again; the adaptive
// budget is throttled once and then stays below the share left.
func TestAdaptiveLearnsNeighboursShare(t *testing.T) {
	// Buckets 10 times faster than AWS's, so that 200 calls take a second.
	fastAWS := budget.Bucket{Size: 100, RefillPerSecond: 200}
	run := func(adaptiveOff bool) (throttled, failed int64) {
		e := ec2apitest.Start(t, ec2sim.Config{Throttle: ec2sim.ThrottleConfig{Neighbours: 0.6,
			Categories: map[ec2sim.ThrottleCategory]ec2sim.Bucket{ec2sim.CategoryNonMutating: {Size: fastAWS.Size, RefillPerSecond: fastAWS.RefillPerSecond}}}}, ec2api.Config{})
		api := budget.New(e.Client, budget.Options{AdaptiveDisabled: adaptiveOff, AdaptiveRecovery: time.Hour, AdaptiveStart: 1,
			Buckets: map[budget.Category]budget.Bucket{budget.NonMutating: fastAWS}})
		for i := range 200 {
			if _, err := api.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{}, fastRetries(3)); err != nil {
				if !adaptiveOff {
					t.Fatalf("call %d: %v", i, err)
				}
				failed++
			}
		}
		st := actionOf(t, api.Snapshot(), "DescribeAvailabilityZones", budget.NonMutating)
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

// TestAdaptiveSlowStart: a new budget starts at half its configured share
// and grows to all of it over the recovery time.
func TestAdaptiveSlowStart(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := budget.New(e.Client, budget.Options{AdaptiveRecovery: time.Second})
	a := actionOf(t, api.Snapshot(), "CreateFleet", budget.Mutating)
	if math.Abs(a.Adaptive.Factor-budget.DefaultAdaptiveStart) > 0.05 || a.Adaptive.Size != 12 || a.Tokens > 12.5 || a.Adaptive.LastSlowdown != nil {
		t.Errorf("new CreateFleet bucket %+v, want the slow start's 12 of 25 tokens", a)
	}
	time.Sleep(1100 * time.Millisecond)
	if a := actionOf(t, api.Snapshot(), "CreateFleet", budget.Mutating); a.Adaptive.Factor != 1 || a.Adaptive.Size != 25 {
		t.Errorf("after the recovery time: %+v, want all 25 tokens", a.Adaptive)
	}
}
