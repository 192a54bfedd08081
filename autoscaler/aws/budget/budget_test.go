package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/budget/budgetstatus"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog/awsquota"
	"github.com/karpx/karpx/ec2sim"
)

// describeCalls are the Describe calls of a burst: seven actions, each
// with its own EC2 bucket of awsquota.NonMutating, as in the P1 incident
// (DescribeLaunchTemplates, DescribeSecurityGroups, DescribeImages,
// DescribeSubnets, ...). The calls are filtered, so none is charged to an
// unfiltered bucket.
var describeCalls = []struct {
	action string
	call   func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error
}{
	{"DescribeAvailabilityZones", func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error {
		_, err := api.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}, opt)
		return err
	}},
	{"DescribeSubnets", func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error {
		_, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: ec2api.TagFilters(map[string]string{ec2sim.DiscoveryTagKey: "karpx"})}, opt)
		return err
	}},
	{"DescribeSecurityGroups", func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error {
		_, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: ec2api.TagFilters(map[string]string{ec2sim.DiscoveryTagKey: "karpx"})}, opt)
		return err
	}},
	{"DescribeImages", func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error {
		_, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"}}, opt)
		return err
	}},
	{"DescribeLaunchTemplates", func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error {
		_, err := api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{}, opt)
		return err
	}},
	{"DescribeInstances", func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error {
		_, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{ec2api.Filter("instance-state-name", "running")}}, opt)
		return err
	}},
	{"DescribeInstanceTypes", func(ctx context.Context, api ec2api.API, opt func(*ec2.Options)) error {
		_, err := api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large"}}, opt)
		return err
	}},
}

// burst is a burst of Describe calls in flight: perAction calls of every
// describeCalls action, each from its own goroutine, started together.
type burst struct {
	perAction int
	mu        sync.Mutex
	answered  map[string]int // calls that returned, per action
	errs      []error
}

// startBurst starts a burst through api. Every call makes one attempt
// (no SDK retries), so each throttled answer is one failed call and the
// counts do not depend on the retryer's backoff.
func startBurst(api ec2api.API, perAction int) *burst {
	b := &burst{perAction: perAction, answered: map[string]int{}}
	for range perAction {
		for _, d := range describeCalls {
			go func() {
				err := d.call(context.Background(), api, fastRetries(1))
				b.mu.Lock()
				defer b.mu.Unlock()
				b.answered[d.action]++
				if err != nil {
					b.errs = append(b.errs, err)
				}
			}()
		}
	}
	return b
}

// settle waits until the burst is still on l's side of the clock: every
// call is answered or queued at l, and every bucket with queued calls has
// less than a token left (its dispatch has served what it could). Only a
// step of the fake clock changes anything after that.
func (b *burst) settle(t *testing.T, l *budget.Limiter) {
	t.Helper()
	waitUntil(t, "every call of the burst answered or queued", func() bool { return b.settled(t, l) })
}

// settled reports whether the burst is settled (see settle). The tokens
// are read before the queues: dispatch spends tokens and dequeues the
// calls it serves in one step, so queues read afterwards show those calls
// neither answered nor queued (not settled yet). Read the other way round,
// a dispatch in between paired the queues from before it with the tokens
// it had spent, and the calls it had just served were missed at EC2 (a
// cold CI run saw 100 calls where 110 were due).
func (b *burst) settled(t *testing.T, l *budget.Limiter) bool {
	st := l.Snapshot()
	queued := map[string]int{}
	b.mu.Lock()
	for _, d := range describeCalls {
		queued[d.action] = l.Queued(d.action)
		if b.answered[d.action]+queued[d.action] != b.perAction {
			b.mu.Unlock()
			return false
		}
	}
	b.mu.Unlock()
	for _, d := range describeCalls {
		if queued[d.action] > 0 && actionOf(t, st, d.action, awsquota.NonMutating).Tokens >= 1 {
			return false
		}
	}
	return true
}

// TestBurstStaysWithinAWSBuckets sends 1,050 concurrent Describe calls
// (150 of each of seven actions) at the simulator with AWS's documented
// buckets. The budget and the simulator share a fake clock that moves one
// second at a time, and only once every call is answered or queued at the
// budget, so the counts follow from awsquota's table and nothing else:
// at the default fraction each action's client-side bucket holds 50 of
// EC2's 100 tokens and refills 10 of its 20 per second, so 50 calls of
// each action reach EC2 at once and 10 more every second, the last ones
// 10 s after the burst; EC2 throttles none. Control: with the budget
// disabled, the 150 calls of each action reach EC2 at once and it
// throttles exactly the 50 beyond its 100 tokens.
func TestBurstStaysWithinAWSBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 2,100 calls through the SDK (about 3 s of CPU)")
	}
	const perAction = 150
	aws := awsquota.Buckets()[awsquota.NonMutating]
	// The budget's bucket of each action: AWS's scaled by DefaultFraction,
	// the size rounded down to whole tokens (budget.New).
	size, refill := int(math.Floor(aws.Size*budget.DefaultFraction)), aws.RefillPerSecond*budget.DefaultFraction
	calls := perAction * len(describeCalls)

	clk := newFakeClock()
	e := ec2apitest.Start(t, ec2sim.Config{Clock: clk}, ec2api.Config{})
	// AdaptiveStart 1: the buckets start at their configured share, the
	// most the budget ever sends (the default slow start sends less).
	api := newLimited(t, e, budget.Options{Clock: clk, AdaptiveStart: 1, Registerer: prometheus.NewRegistry()})
	b := startBurst(api, perAction)
	seconds := 0
	for ; ; seconds++ {
		if seconds > 0 {
			clk.Step(time.Second)
		}
		b.settle(t, api.Limiter)
		want := min(perAction, size+int(refill*float64(seconds)))
		counts := e.Sim.Counts()
		for _, d := range describeCalls {
			if counts[d.action] != int64(want) {
				t.Fatalf("%d s after the burst: %d calls of %s reached EC2, want %d (%d at once, %v per second)",
					seconds, counts[d.action], d.action, want, size, refill)
			}
		}
		if want == perAction || seconds > 2*perAction {
			break
		}
	}
	if wantSeconds := int(math.Ceil(float64(perAction-size) / refill)); seconds != wantSeconds {
		t.Errorf("the burst took %d s of refills, want %d", seconds, wantSeconds)
	}
	if len(b.errs) != 0 {
		t.Errorf("%d calls failed through the budget, first: %v", len(b.errs), b.errs[0])
	}
	if n := throttledAtSim(e.Sim); n != 0 {
		t.Errorf("simulator answered RequestLimitExceeded %d times through the budget", n)
	}
	st := api.Snapshot()
	if st.Totals.Requests != int64(calls) || st.Totals.Throttled != 0 || st.Totals.QuotaErrors != 0 || st.Totals.Retries != 0 || st.Totals.Errors != 0 {
		t.Errorf("budget totals %+v, want %d requests and nothing else", st.Totals, calls)
	}
	// The last tenth of each action's calls waited the whole burst: more
	// than 1% of them, so the 99th percentile is the burst's length.
	if p99 := categoryOf(t, st, awsquota.NonMutating).WaitP99Seconds; p99 != float64(seconds) {
		t.Errorf("client-side wait p99 %v s, want %d s", p99, seconds)
	}
	t.Logf("budget on: %d calls, %d at once per action, all sent after %d s, 0 throttled", calls, size, seconds)

	// Control: the same burst through a Limiter without buckets, on a clock that
	// does not move: EC2's buckets alone decide.
	clk = newFakeClock()
	e = ec2apitest.Start(t, ec2sim.Config{Clock: clk}, ec2api.Config{})
	off := newLimited(t, e, budget.WithoutBuckets(budget.Options{Clock: clk}))
	b = startBurst(off, perAction)
	b.settle(t, off.Limiter)
	st = off.Snapshot()
	if st.Enabled {
		t.Error("Snapshot of a Limiter without buckets says enabled")
	}
	over := perAction - int(aws.Size)
	stats := e.Sim.Stats()
	for _, d := range describeCalls {
		if s := stats[d.action]; s.Requests != perAction || s.Throttled != int64(over) {
			t.Errorf("budget off: %s reached EC2 %d times, %d throttled; want %d and %d", d.action, s.Requests, s.Throttled, perAction, over)
		}
	}
	throttled := throttledAtSim(e.Sim)
	if want := int64(over * len(describeCalls)); throttled != want || st.Totals.Throttled != want || len(b.errs) != int(want) {
		t.Errorf("budget off: simulator throttled %d answers, budget counted %d, %d calls failed; want %d each", throttled, st.Totals.Throttled, len(b.errs), want)
	}
	t.Logf("budget off: %d calls at once, %d throttled answers", calls, throttled)
}

func throttledAtSim(sim *ec2sim.Simulator) int64 {
	var n int64
	for _, st := range sim.Stats() {
		n += st.Throttled
	}
	return n
}

func categoryOf(t *testing.T, st budgetstatus.Status, c awsquota.Category) budgetstatus.CategoryStatus {
	t.Helper()
	for _, cs := range st.Categories {
		if cs.Category == c {
			return cs
		}
	}
	t.Fatalf("no category %s in %+v", c, st.Categories)
	return budgetstatus.CategoryStatus{}
}

func actionOf(t *testing.T, st budgetstatus.Status, action string, c awsquota.Category) budgetstatus.ActionStatus {
	t.Helper()
	for _, as := range st.Actions {
		if as.Action == action && as.Category == c {
			return as
		}
	}
	t.Fatalf("no bucket %s/%s in %+v", action, c, st.Actions)
	return budgetstatus.ActionStatus{}
}

// TestSpeculativeFailsFastCriticalWaits drains a small bucket on a fake
// clock: a Speculative call waits SpeculativeMaxWait and is refused without
// reaching EC2, a Critical one waits for the refill and succeeds, and a
// Critical one whose context ends gives up with the context's error.
func TestSpeculativeFailsFastCriticalWaits(t *testing.T) {
	clk := newFakeClock()
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	reg := prometheus.NewRegistry()
	// AdaptiveStart 1: the bucket starts with its 4 tokens (no slow start).
	api := newLimited(t, e, budget.Options{Fraction: 1, Registerer: reg, Clock: clk, AdaptiveStart: 1,
		Buckets: map[awsquota.Category]awsquota.Bucket{awsquota.NonMutating: {Size: 4, RefillPerSecond: 1}}})
	critical := cloudprovider.WithPriority(context.Background(), cloudprovider.PriorityCritical)
	describe := func(ctx context.Context) func() error {
		return func() error {
			_, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}, ec2apitest.Loopback)
			return err
		}
	}
	for range 4 {
		if err := describe(critical)(); err != nil {
			t.Fatal(err)
		}
	}
	before := e.Sim.Counts()["DescribeSubnets"]
	err := whileQueued(t, api.Limiter, "DescribeSubnets", 1, describe(cloudprovider.WithPriority(context.Background(), cloudprovider.PrioritySpeculative)),
		func() { clk.Step(budget.DefaultSpeculativeMaxWait) })
	var exhausted *budget.ExhaustedError
	if !errors.As(err, &exhausted) || !budget.IsExhausted(err) {
		t.Fatalf("speculative call on an empty bucket: %v, want *budget.ExhaustedError", err)
	}
	if exhausted.Action != "DescribeSubnets" || exhausted.Category != awsquota.NonMutating || exhausted.Priority != cloudprovider.PrioritySpeculative ||
		exhausted.Waited != budget.DefaultSpeculativeMaxWait {
		t.Errorf("ExhaustedError %+v, want DescribeSubnets, non-mutating, speculative, after %v", exhausted, budget.DefaultSpeculativeMaxWait)
	}
	if e.Sim.Counts()["DescribeSubnets"] != before {
		t.Error("the refused speculative call reached EC2")
	}
	// The bucket holds 0.1 tokens: the critical call waits 0.9 s for one.
	if err := whileQueued(t, api.Limiter, "DescribeSubnets", 1, describe(critical), func() { clk.Step(900 * time.Millisecond) }); err != nil {
		t.Fatalf("critical call: %v", err)
	}
	st := actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating)
	if st.Requests != 5 || st.Exhausted != 1 || st.Errors != 0 || st.WaitP99Seconds != 0.9 {
		t.Errorf("DescribeSubnets status %+v, want 5 requests, 1 exhausted, the last after 0.9 s", st)
	}
	if got := metricValue(t, reg, budget.MetricExhausted, map[string]string{"action": "DescribeSubnets", "priority": "speculative"}); got != 1 {
		t.Errorf("%s = %v, want 1", budget.MetricExhausted, got)
	}
	// The bucket is empty and the clock stands still: a critical call
	// waits until its context ends.
	ctx, cancel := context.WithCancel(critical)
	if err := whileQueued(t, api.Limiter, "DescribeSubnets", 1, describe(ctx), cancel); !errors.Is(err, context.Canceled) {
		t.Fatalf("want the context's error, got %v", err)
	}
	if n := api.Queued("DescribeSubnets"); n != 0 {
		t.Errorf("%d calls still queued after the cancelled one", n)
	}
}

// newOneBucket returns a client of a fresh simulator through a Limiter on
// clk that gives cat's actions bucket (AWS's size and refill, whole:
// Fraction 1, no slow start); the other categories keep AWS's buckets.
func newOneBucket(t *testing.T, clk *testingclock.FakeClock, cat awsquota.Category, bucket awsquota.Bucket) limited {
	t.Helper()
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	return newLimited(t, e, budget.Options{Fraction: 1, Clock: clk, AdaptiveStart: 1,
		Buckets: map[awsquota.Category]awsquota.Bucket{cat: bucket}})
}

// servedOrder records, safely from many goroutines, the names of the calls
// in the order the budget let them through.
type servedOrder struct {
	mu    sync.Mutex
	names []string
}

func (o *servedOrder) add(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.names = append(o.names, name)
}

func (o *servedOrder) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.names)
}

// String returns the names, comma-separated.
func (o *servedOrder) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.names, ",")
}

// TestCriticalServedBeforeQueuedNormal queues three Normal calls on an
// empty bucket, then a Critical one, on a fake clock: the next token goes
// to the Critical call, the following ones to the Normal calls.
func TestCriticalServedBeforeQueuedNormal(t *testing.T) {
	clk := newFakeClock()
	bucket := awsquota.Bucket{Size: 1, RefillPerSecond: 5}
	api := newOneBucket(t, clk, awsquota.NonMutating, bucket)
	if _, err := api.DescribeImages(context.Background(), &ec2.DescribeImagesInput{}, ec2apitest.Loopback); err != nil {
		t.Fatal(err)
	}
	var order servedOrder
	record := func(name string, ctx context.Context) {
		if _, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{}, ec2apitest.Loopback); err != nil {
			t.Error(err)
		}
		order.add(name)
	}
	for range 3 {
		go record("normal", context.Background())
	}
	waitUntil(t, "3 normal calls queued", func() bool { return api.Queued("DescribeImages") == 3 })
	go record("critical", cloudprovider.WithPriority(context.Background(), cloudprovider.PriorityCritical))
	waitUntil(t, "the critical call queued", func() bool { return api.Queued("DescribeImages") == 4 })
	oneToken := time.Duration(float64(time.Second) / bucket.RefillPerSecond)
	for n := 1; n <= 4; n++ {
		clk.Step(oneToken)
		waitUntil(t, fmt.Sprintf("%d calls served", n), func() bool { return order.len() == n })
	}
	if got := order.String(); got != "critical,normal,normal,normal" {
		t.Errorf("served in order %s: the critical call should overtake the queued normal calls", got)
	}
}

// TestCallsActingOnMoreInstancesQueueAhead queues TerminateInstances
// calls behind an empty bucket that refills one token every 10 s: A (one
// instance) at 0 s, then at 5 s B (three instances, head start 2 s, turn
// 3 s), C (ten instances, head start 9 s, turn -4 s) and D (one instance,
// turn 5 s). Each call takes one token; they are served in the order of
// their turns, C, A, B, D, not in arrival order (A, B, C, D): C overtakes
// A, which had waited 5 s, while B's head start is too short to.
func TestCallsActingOnMoreInstancesQueueAhead(t *testing.T) {
	clk := newFakeClock()
	api := newOneBucket(t, clk, awsquota.TerminateInstances, awsquota.Bucket{Size: 1, RefillPerSecond: 0.1})
	terminate := func(n int) {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("i-%017x", i+1)
		}
		// The instances do not exist: EC2's error answer comes after the
		// token, which is all the order needs.
		_, _ = api.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids}, fastRetries(1))
	}
	terminate(1) // takes the bucket's only token
	var order servedOrder
	queue := func(name string, n, queuedBefore int) {
		go func() {
			terminate(n)
			order.add(name)
		}()
		waitUntil(t, name+" queued", func() bool { return api.Queued("TerminateInstances") == queuedBefore+1 })
	}
	queue("A", 1, 0)
	clk.Step(5 * time.Second)
	queue("B", 3, 1)
	queue("C", 10, 2)
	queue("D", 1, 3)
	if n := order.len(); n != 0 {
		t.Fatalf("%d calls served before the bucket's next token", n)
	}
	for n := 1; n <= 4; n++ {
		clk.Step(5 * time.Second) // the first step completes A's 10 s
		if n > 1 {
			clk.Step(5 * time.Second)
		}
		waitUntil(t, fmt.Sprintf("%d calls served", n), func() bool { return order.len() == n })
	}
	if got := order.String(); got != "C,A,B,D" {
		t.Errorf("served in order %s, want C,A,B,D: a call counts InstanceHeadStart earlier per instance beyond its first", got)
	}
}

// TestMetricsCountRetriesAndThrottling injects two RequestLimitExceeded
// answers: the SDK retries twice and the third attempt succeeds.
func TestMetricsCountRetriesAndThrottling(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	reg := prometheus.NewRegistry()
	// Adaptation off: the bucket keeps its tokens after throttled answers
	// (TestAdaptiveSlowsDownAndRecovers covers the adaptive budget).
	api := newLimited(t, e, budget.Options{Registerer: reg, AdaptiveDisabled: true})
	if err := e.Sim.Faults().FailNext("DescribeSubnets", "RequestLimitExceeded", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := api.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, fastRetries(3)); err != nil {
		t.Fatal(err)
	}
	st := actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating)
	if st.Requests != 1 || st.Retries != 2 || st.Throttled != 2 || st.Errors != 0 {
		t.Errorf("DescribeSubnets status %+v, want 1 request, 2 retries, 2 throttled", st)
	}
	for name, want := range map[string]float64{budget.MetricRequests: 1, budget.MetricRetries: 2, budget.MetricThrottled: 2, budget.MetricErrors: 0} {
		if got := metricValue(t, reg, name, map[string]string{"action": "DescribeSubnets"}); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Three tokens were taken: the call and its two retries.
	if got := metricValue(t, reg, budget.MetricWaitSeconds, map[string]string{"action": "DescribeSubnets"}); got != 3 {
		t.Errorf("%s has %v observations, want 3", budget.MetricWaitSeconds, got)
	}
	if got := metricValue(t, reg, budget.MetricTokens, map[string]string{"action": "DescribeSubnets", "category": "non-mutating"}); got < 45 || got > 50 {
		t.Errorf("%s = %v, want about 47 of 50", budget.MetricTokens, got)
	}
}

// TestRetryQuotaErrorsAreCounted drains a tiny SDK retry quota.
func TestRetryQuotaErrorsAreCounted(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	reg := prometheus.NewRegistry()
	api := newLimited(t, e, budget.Options{Registerer: reg})
	if err := e.Sim.Faults().FailNext("DescribeImages", "RequestLimitExceeded", 5); err != nil {
		t.Fatal(err)
	}
	// A quota of 5 pays for one retry (5 tokens each).
	_, err := api.DescribeImages(context.Background(), &ec2.DescribeImagesInput{},
		fastRetries(5, func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.NewTokenRateLimit(5) }))
	if err == nil || !strings.Contains(err.Error(), "retry quota exceeded") {
		t.Fatalf("want the SDK's retry quota error, got %v", err)
	}
	st := actionOf(t, api.Snapshot(), "DescribeImages", awsquota.NonMutating)
	if st.QuotaErrors != 1 || st.Errors != 1 || st.Retries != 1 || st.Throttled != 2 {
		t.Errorf("DescribeImages status %+v, want 1 quota error, 1 retry, 2 throttled", st)
	}
	if got := metricValue(t, reg, budget.MetricRetryQuotaExceeded, map[string]string{"action": "DescribeImages"}); got != 1 {
		t.Errorf("%s = %v, want 1", budget.MetricRetryQuotaExceeded, got)
	}
	if got := metricValue(t, reg, budget.MetricErrors, map[string]string{"action": "DescribeImages", "code": "RequestLimitExceeded"}) +
		metricValue(t, reg, budget.MetricErrors, map[string]string{"action": "DescribeImages", "code": "RetryQuotaExceeded"}); got != 1 {
		t.Errorf("%s = %v, want 1", budget.MetricErrors, got)
	}
}

// TestUnfilteredCallsUseTheirOwnBucket checks the bucket choice of bare
// DescribeInstances calls.
func TestUnfilteredCallsUseTheirOwnBucket(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{})
	if _, err := api.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}, ec2apitest.Loopback); err != nil {
		t.Fatal(err)
	}
	if _, err := api.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{}, MaxResults: aws.Int32(5)}, ec2apitest.Loopback); err != nil {
		t.Fatal(err)
	}
	st := api.Snapshot()
	un := actionOf(t, st, "DescribeInstances", awsquota.UnfilteredNonMutating)
	fi := actionOf(t, st, "DescribeInstances", awsquota.NonMutating)
	if un.Requests != 1 || fi.Requests != 1 || un.Size != 25 || un.RefillPerSecond != 5 || fi.Size != 50 || fi.RefillPerSecond != 10 {
		t.Errorf("unfiltered %+v, filtered %+v", un, fi)
	}
	if c := categoryOf(t, st, awsquota.Mutating); c.Size != 25 || c.RefillPerSecond != 2.5 {
		t.Errorf("mutating at the default fraction: %+v, want 25 / 2.5", c)
	}
}

// TestHandlerServesSnapshot reads the JSON of Handler.
func TestHandlerServesSnapshot(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{Fraction: 0.4})
	if _, err := api.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}, ec2apitest.Loopback); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + budget.HandlerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st budgetstatus.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Type") != "application/json" || !st.Enabled || st.Fraction != 0.4 || st.Totals.Requests != 1 || len(st.Categories) == 0 {
		t.Errorf("served %+v", st)
	}
	post, err := http.Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", post.StatusCode)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []budget.Options{{Fraction: 1.5}, {Fraction: -1}, {SpeculativeReserve: 1}} {
		if o.Validate() == nil {
			t.Errorf("%+v: want an error", o)
		}
	}
	if err := (budget.Options{}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestCallInstances: the instances that order a call in its queue are a
// CreateFleet's TotalTargetCapacity and a TerminateInstances' ids, at
// least 1; every other call, or one without them, counts 1.
func TestCallInstances(t *testing.T) {
	for _, c := range []struct {
		name string
		in   any
		want int
	}{
		{"CreateFleet of 16", &ec2.CreateFleetInput{TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(16)}}, 16},
		{"CreateFleet without capacity", &ec2.CreateFleetInput{TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{}}, 1},
		{"CreateFleet without specification", &ec2.CreateFleetInput{}, 1},
		{"nil CreateFleet", (*ec2.CreateFleetInput)(nil), 1},
		{"TerminateInstances of 3", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-1", "i-2", "i-3"}}, 3},
		{"TerminateInstances of none", &ec2.TerminateInstancesInput{}, 1},
		{"DescribeInstances of 5 ids", &ec2.DescribeInstancesInput{InstanceIds: []string{"i-1", "i-2", "i-3", "i-4", "i-5"}}, 1},
	} {
		if got := budget.CallInstances(c.in); got != c.want {
			t.Errorf("%s: %d instances, want %d", c.name, got, c.want)
		}
	}
}
