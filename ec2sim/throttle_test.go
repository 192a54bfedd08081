package ec2sim

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpx/karpx/catalog/awsquota"
)

// TestBurstAboveTheDefaultBucketIsThrottled bursts DescribeAvailabilityZones
// calls at its default bucket (awsquota's non-mutating bucket: 100 tokens,
// 20/s) on a fake Config.Clock, so the counts are exact: a burst of the
// bucket's size passes (the control), the calls above it are all throttled,
// and after 2.5 s exactly the 50 tokens refilled pass again.
func TestBurstAboveTheDefaultBucketIsThrottled(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk})
	ctx := context.Background()
	b, ok := DefaultBucket("DescribeAvailabilityZones", false)
	if !ok || b != awsquota.Buckets()[awsquota.NonMutating] {
		t.Fatalf("DescribeAvailabilityZones bucket %+v, %v; want awsquota's non-mutating bucket", b, ok)
	}
	// burst sends n calls at the current fake time and returns how many
	// passed; the others must be RequestLimitExceeded.
	burst := func(n int) (passed int) {
		t.Helper()
		for range n {
			_, err := env.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
			if err == nil {
				passed++
				continue
			}
			apiErr(t, err, "RequestLimitExceeded", 503)
		}
		return passed
	}

	size := int(b.Size)
	if got := burst(size); got != size {
		t.Fatalf("a burst of %d, the bucket's size, passed %d calls; want all", size, got)
	}
	const over = 50
	if got := burst(over); got != 0 {
		t.Fatalf("%d calls above an empty bucket with the clock stopped: %d passed, want 0", over, got)
	}
	wait := 2500 * time.Millisecond
	refilled := int(b.RefillPerSecond * wait.Seconds()) // 50 at 20/s, below the size
	clk.Step(wait)
	if got := burst(refilled + over); got != refilled {
		t.Fatalf("after %v at %v/s: %d of %d calls passed, want exactly %d", wait, b.RefillPerSecond, got, refilled+over, refilled)
	}

	throttled := int64(over + over)
	st := env.sim.Stats()["DescribeAvailabilityZones"]
	if st.Requests != int64(size+over+refilled+over) || st.Throttled != throttled || st.Errors != throttled {
		t.Fatalf("stats %+v, want %d requests, %d throttled", st, size+over+refilled+over, throttled)
	}
	// Other actions have their own buckets.
	if _, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("DescribeSubnets throttled with DescribeAvailabilityZones: %v", err)
	}
}

// TestSDKRetryerRetriesThrottling checks that RequestLimitExceeded is a
// retryable throttling error for aws-sdk-go-v2's standard retryer: the
// retryer (retry quota included) classifies every throttled CreateFleet as
// a throttle and retries it. Time is a fake Config.Clock that moves only
// in the retryer's backoff, by the one second the bucket needs for one
// token, so the counts are exact: a bucket of 3 passes the first 3 calls,
// and each of the other 9 is throttled once and passes on its retry.
func TestSDKRetryerRetriesThrottling(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, Throttle: ThrottleConfig{Categories: map[ThrottleCategory]Bucket{
		awsquota.Mutating: {Size: 3, RefillPerSecond: 1}}}})
	ctx := context.Background()
	env.launchTemplate(t, "retry", env.al2023(t, "x86_64"), "")
	backoffs := 0
	client := env.ec2Client(20, func(o *ec2.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 20
			so.Backoff = retry.BackoffDelayerFunc(func(_ int, err error) (time.Duration, error) {
				if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) != aws.TrueTernary {
					t.Errorf("retried an error the SDK does not count as throttling: %v", err)
				}
				backoffs++
				clk.Step(time.Second) // one token at 1/s
				return 0, nil
			})
		})
	})
	const calls, size = 12, 3
	for i := range calls {
		out, err := client.CreateFleet(ctx, fleetInput("retry", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	const throttled = calls - size
	st := env.sim.Stats()["CreateFleet"]
	if st.Throttled != throttled || st.Requests != calls+throttled || st.Errors != throttled || backoffs != throttled {
		t.Fatalf("stats %+v after %d backoffs; want %d requests, %d throttled, each retried once", st, backoffs, calls+throttled, throttled)
	}
	if n := len(env.sim.Instances()); n != calls {
		t.Fatalf("retries launched %d instances, want %d", n, calls)
	}
}

func TestUnfilteredDescribeHasItsOwnBucket(t *testing.T) {
	env := newTestEnv(t, Config{Throttle: ThrottleConfig{Categories: map[ThrottleCategory]Bucket{
		awsquota.UnfilteredNonMutating: {Size: 2, RefillPerSecond: 0.001}}}})
	ctx := context.Background()
	for range 2 {
		if _, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	apiErr(t, err, "RequestLimitExceeded", 503)
	// Filtered and paginated calls use the non-mutating bucket.
	if _, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"running"}}}}); err != nil {
		t.Fatal(err)
	}
	// Disabling throttling (also possible over PUT /_sim/throttle) lets it through.
	env.sim.SetThrottle(ThrottleConfig{Disabled: true})
	if _, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatal(err)
	}
}

func TestTokenBucketRefills(t *testing.T) {
	th := newThrottler(ThrottleConfig{Categories: map[ThrottleCategory]Bucket{awsquota.Mutating: {Size: 2, RefillPerSecond: 4}}}.withDefaults())
	now := t0
	for i, want := range []bool{true, true, false} {
		if got := th.allow("CreateFleet", awsquota.Mutating, false, now); got != want {
			t.Fatalf("call %d: %v", i, got)
		}
	}
	now = now.Add(250 * time.Millisecond) // one token
	if !th.allow("CreateFleet", awsquota.Mutating, false, now) || th.allow("CreateFleet", awsquota.Mutating, false, now) {
		t.Fatal("want exactly one token after 250ms at 4/s")
	}
	now = now.Add(time.Hour) // capped at Size
	for i, want := range []bool{true, true, false} {
		if got := th.allow("CreateFleet", awsquota.Mutating, false, now); got != want {
			t.Fatalf("after refill, call %d: %v", i, got)
		}
	}
	if d := DefaultThrottleConfig().Categories; d[awsquota.NonMutating] != (Bucket{Size: 100, RefillPerSecond: 20}) || d[awsquota.RunInstances] != (Bucket{Size: 5, RefillPerSecond: 2}) {
		t.Fatalf("defaults %v", d)
	}
}

// TestDefaultRefillRate checks DefaultRefillRate against the categories'
// buckets in DefaultThrottleConfig.
func TestDefaultRefillRate(t *testing.T) {
	cats := DefaultThrottleConfig().Categories
	for action, want := range map[string]float64{
		"CreateFleet":       cats[awsquota.Mutating].RefillPerSecond,
		"CreateTags":        cats[awsquota.CreateTags].RefillPerSecond,
		"DescribeInstances": cats[awsquota.NonMutating].RefillPerSecond, // filtered calls
		"RunInstances":      cats[awsquota.RunInstances].RefillPerSecond,
		"GetParameter":      cats[awsquota.SSMGetParameter].RefillPerSecond,
	} {
		if got, ok := DefaultRefillRate(action); !ok || got != want {
			t.Errorf("DefaultRefillRate(%q) = %v, %v; want %v, true", action, got, ok, want)
		}
	}
	if got, ok := DefaultRefillRate("NoSuchAction"); ok || got != 0 {
		t.Errorf("DefaultRefillRate(NoSuchAction) = %v, %v; want 0, false", got, ok)
	}
	for _, action := range Actions() {
		if got, ok := DefaultRefillRate(action); !ok || got <= 0 {
			t.Errorf("DefaultRefillRate(%q) = %v, %v; want a positive rate", action, got, ok)
		}
	}
}
