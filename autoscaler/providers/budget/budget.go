package budget

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/karpx/karpx/autoscaler/providers/ec2api"
)

// Defaults of Options.
const (
	// DefaultSpeculativeMaxWait is how long a Speculative call may wait for
	// a token: long enough to ride out the refill of a busy bucket (one
	// token of the non-mutating bucket at the default fraction comes every
	// 100ms), short enough that a refresh loop notices an exhausted budget
	// at once.
	DefaultSpeculativeMaxWait = 100 * time.Millisecond
	// DefaultSpeculativeReserve is the share of each bucket Speculative
	// calls must leave to Critical and Normal calls.
	DefaultSpeculativeReserve = 0.25
)

// Options configure an API. The zero value means the defaults below.
type Options struct {
	// Fraction scales AWS's documented bucket sizes and refill rates
	// (AWSBuckets, or Buckets): 0.5 allows karpx half of the account's
	// budget. It must be in (0, 1]; zero means DefaultFraction.
	Fraction float64
	// Buckets overrides AWS's documented buckets per category, before
	// Fraction applies (accounts with raised limits). Missing categories
	// keep AWSBuckets' values.
	Buckets map[Category]Bucket
	// Disabled passes every call through without taking tokens; metrics
	// and Snapshot still count them. For the "protections off" control run.
	Disabled bool
	// SpeculativeMaxWait is the longest a Speculative call waits for a
	// token before *ExhaustedError. Zero means DefaultSpeculativeMaxWait;
	// negative means no wait at all.
	SpeculativeMaxWait time.Duration
	// SpeculativeReserve is the share of each bucket, in [0, 1), that
	// Speculative calls must leave. Zero means DefaultSpeculativeReserve;
	// negative means none.
	SpeculativeReserve float64
	// AdaptiveDisabled keeps every bucket at its configured size and rate
	// even when AWS throttles its action (see adaptive.go). Default false:
	// a throttled action's bucket slows down.
	AdaptiveDisabled bool
	// AdaptiveDecrease, in (0, 1), multiplies a bucket's size and refill
	// rate when AWS throttles its action. Zero means
	// DefaultAdaptiveDecrease.
	AdaptiveDecrease float64
	// AdaptiveMinFactor, in (0, 1], is the lowest share of its configured
	// size and rate a bucket slows down to. Zero means
	// DefaultAdaptiveMinFactor.
	AdaptiveMinFactor float64
	// AdaptiveHold is the time after a slow-down during which further
	// throttled answers do not slow the bucket again. Zero means
	// DefaultAdaptiveHold.
	AdaptiveHold time.Duration
	// AdaptiveRecovery is the time a slowed bucket takes to return
	// linearly to its configured rate. Zero means DefaultAdaptiveRecovery.
	AdaptiveRecovery time.Duration
	// AdaptiveStart, in (0, 1], is the share of its configured size and
	// rate a bucket starts at, growing linearly to all of it over
	// AdaptiveRecovery (a slow start). Zero means DefaultAdaptiveStart; 1
	// starts at the configured rate.
	AdaptiveStart float64
	// Clock tells the time for the buckets' refill, waits and adaptation
	// (a k8s.io/utils/clock testing.FakeClock makes them deterministic in
	// tests). Nil means the real clock.
	Clock clock.WithDelayedExecution
	// Registerer receives the metrics (see the Metric* constants), e.g.
	// controller-runtime's metrics.Registry. Nil registers nothing;
	// Snapshot works either way.
	Registerer prometheus.Registerer
	// Logger receives the log lines (retry quota exhaustion at level 0,
	// throttled answers and refused speculative calls at level 1). Zero
	// means logr.Discard().
	Logger logr.Logger
}

// AddFlags registers --aws-api-budget-fraction and --aws-api-budget-disabled
// on fs, bound to o.Fraction and o.Disabled.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	if o.Fraction == 0 {
		o.Fraction = DefaultFraction
	}
	fs.Float64Var(&o.Fraction, "aws-api-budget-fraction", o.Fraction,
		"share of AWS's documented EC2/SSM request token buckets (size and refill rate) karpx may use, in (0, 1]")
	fs.BoolVar(&o.Disabled, "aws-api-budget-disabled", o.Disabled,
		"send EC2/SSM calls without client-side token buckets (metrics are still counted)")
	fs.BoolVar(&o.AdaptiveDisabled, "aws-api-budget-adaptive-disabled", o.AdaptiveDisabled,
		"keep each client-side bucket at its configured rate even when AWS answers RequestLimitExceeded")
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Fraction == 0 {
		o.Fraction = DefaultFraction
	}
	if !(o.Fraction > 0 && o.Fraction <= 1) {
		return o, fmt.Errorf("budget fraction %v is not in (0, 1]", o.Fraction)
	}
	if o.SpeculativeMaxWait == 0 {
		o.SpeculativeMaxWait = DefaultSpeculativeMaxWait
	}
	if o.SpeculativeReserve == 0 {
		o.SpeculativeReserve = DefaultSpeculativeReserve
	}
	o.SpeculativeReserve = max(o.SpeculativeReserve, 0)
	if o.AdaptiveDecrease == 0 {
		o.AdaptiveDecrease = DefaultAdaptiveDecrease
	}
	if !(o.AdaptiveDecrease > 0 && o.AdaptiveDecrease < 1) {
		return o, fmt.Errorf("adaptive decrease %v is not in (0, 1)", o.AdaptiveDecrease)
	}
	if o.AdaptiveMinFactor == 0 {
		o.AdaptiveMinFactor = DefaultAdaptiveMinFactor
	}
	if !(o.AdaptiveMinFactor > 0 && o.AdaptiveMinFactor <= 1) {
		return o, fmt.Errorf("adaptive minimum factor %v is not in (0, 1]", o.AdaptiveMinFactor)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.AdaptiveHold == 0 {
		o.AdaptiveHold = DefaultAdaptiveHold
	}
	if o.AdaptiveRecovery == 0 {
		o.AdaptiveRecovery = DefaultAdaptiveRecovery
	}
	if o.AdaptiveStart == 0 {
		o.AdaptiveStart = DefaultAdaptiveStart
	}
	if !(o.AdaptiveStart > 0 && o.AdaptiveStart <= 1) {
		return o, fmt.Errorf("adaptive start %v is not in (0, 1]", o.AdaptiveStart)
	}
	if o.SpeculativeReserve >= 1 {
		return o, fmt.Errorf("speculative reserve %v is not in [0, 1)", o.SpeculativeReserve)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o, nil
}

// API is an ec2api.API that takes a token from a client-side bucket before
// every call and every SDK retry, so karpx never sends more than
// Options.Fraction of AWS's documented request rates. It is safe for
// concurrent use.
type API struct {
	next    ec2api.API
	opts    Options
	log     logr.Logger
	buckets map[bucketKey]*bucket
	order   []*bucket // buckets sorted by category, then action
	stats   map[bucketKey]*counters
	metrics *metrics
}

type bucketKey struct {
	action     string
	unfiltered bool
}

var _ ec2api.API = (*API)(nil)

// Validate reports options New cannot use: a Fraction outside (0, 1] or
// a SpeculativeReserve of 1 or more. Call it where flags are parsed.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// New returns an API that calls next within the budget of opts. It panics
// when opts.Validate fails, a programming error.
func New(next ec2api.API, opts Options) *API {
	opts, err := opts.withDefaults()
	if err != nil {
		panic(fmt.Sprintf("budget.New: %v", err))
	}
	aws := AWSBuckets()
	for c, b := range opts.Buckets {
		aws[c] = b
	}
	a := &API{next: next, opts: opts, log: opts.Logger.WithName("budget"),
		buckets: map[bucketKey]*bucket{}, stats: map[bucketKey]*counters{}}
	add := func(action string, cat Category, unfiltered bool) {
		k := bucketKey{action, unfiltered}
		b := newBucket(action, cat, unfiltered, aws[cat], opts.Fraction, &opts)
		if !b.adaptOff && opts.AdaptiveStart < 1 {
			b.startAdaptation(opts.AdaptiveStart, opts.Clock.Now())
		}
		a.buckets[k], a.stats[k] = b, &counters{}
		a.order = append(a.order, b)
	}
	for action, cat := range actionCategories {
		add(action, cat, false)
	}
	add(actionDescribeInstances, UnfilteredNonMutating, true)
	add(actionDescribeSecurityGroups, UnfilteredNonMutating, true)
	sort.Slice(a.order, func(i, j int) bool {
		if a.order[i].category != a.order[j].category {
			return a.order[i].category < a.order[j].category
		}
		return a.order[i].action < a.order[j].action
	})
	a.metrics = newMetrics(opts.Registerer, func() []*bucket { return a.order })
	return a
}

// call is one API call in flight: its bucket, priority and attempts.
type call struct {
	a        *API
	b        *bucket
	st       *counters
	prio     Priority
	attempts atomic.Int32
}

// begin takes the first token of a call. It returns *ExhaustedError for a
// Speculative call the budget cannot serve, or ctx's error.
func (a *API) begin(ctx context.Context, action string, unfiltered bool) (*call, error) {
	k := bucketKey{action, unfiltered}
	c := &call{a: a, b: a.buckets[k], st: a.stats[k], prio: PriorityFrom(ctx)}
	if err := c.take(ctx); err != nil {
		return nil, err
	}
	a.metrics.requests.WithLabelValues(action).Inc()
	c.st.add(func(s *counters) { s.requests++ })
	return c, nil
}

// take waits for a token of c's bucket, unless the budget is disabled,
// and records the wait.
func (c *call) take(ctx context.Context) error {
	if c.a.opts.Disabled {
		return nil
	}
	wait, err := c.b.acquire(ctx, c.prio)
	c.a.metrics.wait.WithLabelValues(c.b.action, c.prio.String()).Observe(wait.Seconds())
	c.st.observeWait(wait.Seconds())
	var exhausted *ExhaustedError
	if errors.As(err, &exhausted) {
		c.a.metrics.exhausted.WithLabelValues(c.b.action, c.prio.String()).Inc()
		c.st.add(func(s *counters) { s.exhausted++ })
		c.a.log.V(1).Info("Refused a speculative call: client-side budget exhausted", "action", c.b.action,
			"category", c.b.category, "tokens", exhausted.Tokens, "reserve", exhausted.Reserve)
	}
	return err
}

// end records the outcome of the call and returns err.
func (c *call) end(err error) error {
	if err == nil {
		return nil
	}
	code := ec2api.Code(err)
	quota := isQuotaExceeded(err)
	switch {
	case code != "":
	case quota:
		code = "RetryQuotaExceeded"
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		code = "Canceled"
	default:
		code = "ClientError"
	}
	c.a.metrics.errors.WithLabelValues(c.b.action, code).Inc()
	c.st.add(func(s *counters) {
		s.errors++
		if quota {
			s.quotaErrors++
		}
	})
	if quota {
		c.a.metrics.quota.WithLabelValues(c.b.action).Inc()
		c.a.log.Info("AWS SDK retry quota exhausted", "action", c.b.action, "error", err.Error())
	}
	return err
}

// isQuotaExceeded reports whether err is the standard retryer's "failed to
// get rate limit token, retry quota exceeded" error.
func isQuotaExceeded(err error) bool {
	var q ratelimit.QuotaExceededError
	if errors.As(err, &q) {
		return true
	}
	var qp *ratelimit.QuotaExceededError
	return errors.As(err, &qp)
}

// isThrottle reports whether code is one the SDK treats as throttling.
func isThrottle(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}

// attemptsID names the per-attempt middleware.
const attemptsID = "karpx.budget.Attempts"

// ID implements middleware.FinalizeMiddleware.
func (c *call) ID() string { return attemptsID }

// HandleFinalize runs once per SDK attempt, inside the retry loop: it
// takes a token for every retry (the first attempt's token was taken by
// begin), counts retries and throttled answers.
func (c *call) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if c.attempts.Add(1) > 1 {
		c.a.metrics.retries.WithLabelValues(c.b.action).Inc()
		c.st.add(func(s *counters) { s.retries++ })
		if err := c.take(ctx); err != nil {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, err
		}
	}
	out, md, err := next.HandleFinalize(ctx, in)
	if code := ec2api.Code(err); isThrottle(code) {
		c.a.metrics.throttled.WithLabelValues(c.b.action).Inc()
		c.st.add(func(s *counters) { s.throttled++ })
		c.a.log.V(1).Info("Throttled by AWS", "action", c.b.action, "code", code, "attempt", c.attempts.Load())
		if now := c.b.clock.Now(); c.b.onThrottled(now) {
			factor, size, refill, _, _ := c.b.adaptation(now)
			c.a.log.Info("Slowed down the client-side budget after a throttled answer", "action", c.b.action,
				"code", code, "factor", factor, "size", size, "refillPerSecond", refill)
		}
	}
	return out, md, err
}

// addToStack inserts c right after the SDK's retry middleware, so it runs
// for every attempt.
func (c *call) addToStack(stack *middleware.Stack) error {
	if err := stack.Finalize.Insert(c, "Retry", middleware.After); err != nil {
		return stack.Finalize.Add(c, middleware.After)
	}
	return nil
}

// ec2Opts returns optFns plus the option that installs c's middleware.
func (c *call) ec2Opts(optFns []func(*ec2.Options)) []func(*ec2.Options) {
	return append(slices.Clip(optFns), func(o *ec2.Options) { o.APIOptions = append(o.APIOptions, c.addToStack) })
}

// ssmOpts is ec2Opts for SSM.
func (c *call) ssmOpts(optFns []func(*ssm.Options)) []func(*ssm.Options) {
	return append(slices.Clip(optFns), func(o *ssm.Options) { o.APIOptions = append(o.APIOptions, c.addToStack) })
}

// DescribeInstanceTypes implements ec2api.API.
func (a *API) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	c, err := a.begin(ctx, actionDescribeInstanceTypes, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeInstanceTypes(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeInstanceTypeOfferings implements ec2api.API.
func (a *API) DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	c, err := a.begin(ctx, actionDescribeInstanceTypeOfferings, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeInstanceTypeOfferings(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeAvailabilityZones implements ec2api.API.
func (a *API) DescribeAvailabilityZones(ctx context.Context, in *ec2.DescribeAvailabilityZonesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error) {
	c, err := a.begin(ctx, actionDescribeAvailabilityZones, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeAvailabilityZones(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeSubnets implements ec2api.API.
func (a *API) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	c, err := a.begin(ctx, actionDescribeSubnets, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeSubnets(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeSecurityGroups implements ec2api.API. Calls without ids, names,
// filters and MaxResults are charged to the unfiltered bucket.
func (a *API) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	c, err := a.begin(ctx, actionDescribeSecurityGroups, unfilteredDescribeSecurityGroups(in))
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeSecurityGroups(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeImages implements ec2api.API.
func (a *API) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	c, err := a.begin(ctx, actionDescribeImages, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeImages(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// CreateLaunchTemplate implements ec2api.API.
func (a *API) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	c, err := a.begin(ctx, actionCreateLaunchTemplate, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.CreateLaunchTemplate(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeLaunchTemplates implements ec2api.API.
func (a *API) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	c, err := a.begin(ctx, actionDescribeLaunchTemplates, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeLaunchTemplates(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DeleteLaunchTemplate implements ec2api.API.
func (a *API) DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	c, err := a.begin(ctx, actionDeleteLaunchTemplate, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DeleteLaunchTemplate(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// CreateFleet implements ec2api.API.
func (a *API) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	c, err := a.begin(ctx, actionCreateFleet, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.CreateFleet(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeInstances implements ec2api.API. Calls without ids, filters and
// MaxResults are charged to the unfiltered bucket.
func (a *API) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	c, err := a.begin(ctx, actionDescribeInstances, unfilteredDescribeInstances(in))
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeInstances(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// TerminateInstances implements ec2api.API.
func (a *API) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	c, err := a.begin(ctx, actionTerminateInstances, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.TerminateInstances(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// CreateTags implements ec2api.API.
func (a *API) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	c, err := a.begin(ctx, actionCreateTags, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.CreateTags(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeSpotPriceHistory implements ec2api.API.
func (a *API) DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	c, err := a.begin(ctx, actionDescribeSpotPriceHistory, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeSpotPriceHistory(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// GetParameter implements ec2api.API.
func (a *API) GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	c, err := a.begin(ctx, actionGetParameter, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.GetParameter(ctx, in, c.ssmOpts(optFns)...)
	return out, c.end(err)
}
