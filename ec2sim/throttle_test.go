package ec2sim

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpx/karpx/catalog/awsquota"
)

// TestBurstAboveTheDefaultBucketIsThrottled bursts 150 Describe calls at
// the EC2 default non-mutating bucket (100 tokens, 20/s).
func TestBurstAboveTheDefaultBucketIsThrottled(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	ok, throttled := 0, 0
	start := time.Now()
	for range 150 {
		_, err := env.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
		if err == nil {
			ok++
			continue
		}
		apiErr(t, err, "RequestLimitExceeded", 503)
		throttled++
	}
	// Refill during the burst adds 20 tokens per second.
	maxOK := 100 + int(20*time.Since(start).Seconds()) + 1
	if ok < 100 || ok > maxOK || throttled == 0 {
		t.Fatalf("ok=%d (want 100..%d) throttled=%d", ok, maxOK, throttled)
	}
	st := env.sim.Stats()["DescribeAvailabilityZones"]
	if st.Requests != 150 || st.Throttled != int64(throttled) || st.Errors != int64(throttled) {
		t.Fatalf("stats %+v, throttled %d", st, throttled)
	}
	// Other actions have their own buckets.
	if _, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("DescribeSubnets throttled with DescribeAvailabilityZones: %v", err)
	}
}

// TestSDKRetryerRetriesThrottling checks that RequestLimitExceeded is a
// retryable throttling error for aws-sdk-go-v2's standard retryer.
func TestSDKRetryerRetriesThrottling(t *testing.T) {
	env := newTestEnv(t, Config{Throttle: ThrottleConfig{Categories: map[ThrottleCategory]Bucket{
		awsquota.Mutating: {Size: 3, RefillPerSecond: 50}}}})
	ctx := context.Background()
	env.launchTemplate(t, "retry", env.al2023(t, "x86_64"), "")
	client := env.ec2Client(20)
	const calls = 12
	for i := range calls {
		out, err := client.CreateFleet(ctx, fleetInput("retry", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	st := env.sim.Stats()["CreateFleet"]
	if st.Throttled == 0 || st.Requests != calls+st.Throttled || st.Errors != st.Throttled {
		t.Fatalf("want retried throttling: %+v", st)
	}
	if n := len(env.sim.Instances()); n != calls {
		t.Fatalf("retries launched %d instances, want %d", n, calls)
	}
	t.Logf("%d calls took %d attempts", calls, st.Requests)
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
