package budget_test

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/karpx/karpx/autoscaler/providers/budget"
	"github.com/karpx/karpx/autoscaler/providers/ec2api"
	"github.com/karpx/karpx/autoscaler/providers/ec2api/ec2apitest"
	"github.com/karpx/karpx/catalog/awsquota"
	"github.com/karpx/karpx/ec2sim"
)

// describeCalls are the Describe calls of a burst, round robin: seven
// actions, each with its own EC2 bucket, as in the P1 incident
// (DescribeLaunchTemplates, DescribeSecurityGroups, DescribeImages,
// DescribeSubnets, ...).
var describeCalls = []func(ctx context.Context, api ec2api.API) error{
	func(ctx context.Context, api ec2api.API) error {
		_, err := api.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}, ec2apitest.Loopback)
		return err
	},
	func(ctx context.Context, api ec2api.API) error {
		_, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: ec2api.TagFilters(map[string]string{ec2sim.DiscoveryTagKey: "karpx"})}, ec2apitest.Loopback)
		return err
	},
	func(ctx context.Context, api ec2api.API) error {
		_, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: ec2api.TagFilters(map[string]string{ec2sim.DiscoveryTagKey: "karpx"})}, ec2apitest.Loopback)
		return err
	},
	func(ctx context.Context, api ec2api.API) error {
		_, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"}}, ec2apitest.Loopback)
		return err
	},
	func(ctx context.Context, api ec2api.API) error {
		_, err := api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{}, ec2apitest.Loopback)
		return err
	},
	func(ctx context.Context, api ec2api.API) error {
		_, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{ec2api.Filter("instance-state-name", "running")}}, ec2apitest.Loopback)
		return err
	},
	func(ctx context.Context, api ec2api.API) error {
		_, err := api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large"}}, ec2apitest.Loopback)
		return err
	},
}

// burst sends n concurrent Describe calls through api and returns their
// errors.
func burst(api ec2api.API, n int) []error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			if err := describeCalls[i%len(describeCalls)](context.Background(), api); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

func throttledAtSim(sim *ec2sim.Simulator) int64 {
	var n int64
	for _, st := range sim.Stats() {
		n += st.Throttled
	}
	return n
}

// TestBurstStaysWithinAWSBuckets sends 1,000 concurrent Describe calls at
// the simulator with AWS's documented buckets: through the budget, EC2
// throttles none of them and the SDK never runs out of retry quota; with
// the budget disabled, the same burst is throttled.
func TestBurstStaysWithinAWSBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 10s of refills")
	}
	const calls = 1000

	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{Registerer: prometheus.NewRegistry()})
	errs := burst(api, calls)
	st := api.Snapshot()
	if len(errs) != 0 {
		t.Errorf("%d calls failed through the budget, first: %v", len(errs), errs[0])
	}
	if n := throttledAtSim(e.Sim); n != 0 {
		t.Errorf("simulator answered RequestLimitExceeded %d times through the budget", n)
	}
	if st.Totals.Requests != calls || st.Totals.Throttled != 0 || st.Totals.QuotaErrors != 0 || st.Totals.Retries != 0 {
		t.Errorf("budget totals %+v, want %d requests and nothing else", st.Totals, calls)
	}
	t.Logf("budget on: %d calls, client-side wait p99 %.2fs (non-mutating)", calls, categoryOf(t, st, awsquota.NonMutating).WaitP99Seconds)

	// Control run: same burst, protections off.
	e = ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	off := newLimited(t, e, budget.Options{Disabled: true})
	errs = burst(off, calls)
	st = off.Snapshot()
	if st.Enabled {
		t.Error("Snapshot of a disabled budget says enabled")
	}
	throttled := throttledAtSim(e.Sim)
	if throttled == 0 || st.Totals.Throttled != throttled {
		t.Errorf("budget off: simulator throttled %d answers, budget counted %d; want both > 0 and equal", throttled, st.Totals.Throttled)
	}
	t.Logf("budget off: %d throttled answers, %d retries, %d failed calls (%d retry quota exceeded)",
		throttled, st.Totals.Retries, len(errs), st.Totals.QuotaErrors)
}

func categoryOf(t *testing.T, st budget.Status, c awsquota.Category) budget.CategoryStatus {
	t.Helper()
	for _, cs := range st.Categories {
		if cs.Category == c {
			return cs
		}
	}
	t.Fatalf("no category %s in %+v", c, st.Categories)
	return budget.CategoryStatus{}
}

func actionOf(t *testing.T, st budget.Status, action string, c awsquota.Category) budget.ActionStatus {
	t.Helper()
	for _, as := range st.Actions {
		if as.Action == action && as.Category == c {
			return as
		}
	}
	t.Fatalf("no bucket %s/%s in %+v", action, c, st.Actions)
	return budget.ActionStatus{}
}

// TestSpeculativeFailsFastCriticalWaits drains a small bucket: a
// Speculative call is refused without reaching EC2, a Critical one waits
// for the refill and succeeds.
func TestSpeculativeFailsFastCriticalWaits(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	reg := prometheus.NewRegistry()
	api := newLimited(t, e, budget.Options{Fraction: 1, Registerer: reg,
		Buckets: map[awsquota.Category]awsquota.Bucket{awsquota.NonMutating: {Size: 4, RefillPerSecond: 1}}})
	critical := budget.WithPriority(context.Background(), budget.Critical)
	for range 4 {
		if _, err := api.DescribeSubnets(critical, &ec2.DescribeSubnetsInput{}, ec2apitest.Loopback); err != nil {
			t.Fatal(err)
		}
	}
	before := e.Sim.Counts()["DescribeSubnets"]
	_, err := api.DescribeSubnets(budget.WithPriority(context.Background(), budget.Speculative), &ec2.DescribeSubnetsInput{}, ec2apitest.Loopback)
	var exhausted *budget.ExhaustedError
	if !errors.As(err, &exhausted) || !budget.IsExhausted(err) {
		t.Fatalf("speculative call on an empty bucket: %v, want *budget.ExhaustedError", err)
	}
	if exhausted.Action != "DescribeSubnets" || exhausted.Category != awsquota.NonMutating || exhausted.Priority != budget.Speculative {
		t.Errorf("ExhaustedError %+v", exhausted)
	}
	if e.Sim.Counts()["DescribeSubnets"] != before {
		t.Error("the refused speculative call reached EC2")
	}
	if _, err := api.DescribeSubnets(critical, &ec2.DescribeSubnetsInput{}, ec2apitest.Loopback); err != nil {
		t.Fatalf("critical call: %v", err)
	}
	st := actionOf(t, api.Snapshot(), "DescribeSubnets", awsquota.NonMutating)
	if st.Requests != 5 || st.Exhausted != 1 || st.Errors != 0 {
		t.Errorf("DescribeSubnets status %+v", st)
	}
	if got := metricValue(t, reg, budget.MetricExhausted, map[string]string{"action": "DescribeSubnets", "priority": "speculative"}); got != 1 {
		t.Errorf("%s = %v, want 1", budget.MetricExhausted, got)
	}
	// A cancelled critical call gives up with its context's error.
	ctx, cancel := context.WithTimeout(critical, 10*time.Millisecond)
	defer cancel()
	for {
		if _, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}, ec2apitest.Loopback); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want the context's error, got %v", err)
			}
			break
		}
	}
}

// TestCriticalServedBeforeQueuedNormal queues Normal calls on an empty
// bucket and checks that a later Critical call is served first.
func TestCriticalServedBeforeQueuedNormal(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{Fraction: 1,
		Buckets: map[awsquota.Category]awsquota.Bucket{awsquota.NonMutating: {Size: 1, RefillPerSecond: 5}}})
	if _, err := api.DescribeImages(context.Background(), &ec2.DescribeImagesInput{}, ec2apitest.Loopback); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	record := func(name string, ctx context.Context) {
		if _, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{}, ec2apitest.Loopback); err != nil {
			t.Error(err)
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	for range 3 {
		wg.Go(func() { record("normal", context.Background()) })
	}
	// Let the three Normal calls queue on the empty bucket (if they have
	// not yet, the Critical call is served first all the more).
	time.Sleep(20 * time.Millisecond)
	wg.Go(func() { record("critical", budget.WithPriority(context.Background(), budget.Critical)) })
	wg.Wait()
	if i := strings.Index(strings.Join(order, ","), "critical"); i < 0 || order[len(order)-1] == "critical" {
		t.Errorf("served in order %v: the critical call should overtake queued normal calls", order)
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
	var st budget.Status
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
