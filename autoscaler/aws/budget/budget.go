package budget

import (
	"flag"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/karpx/karpx/catalog/awsquota"
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

// Options configure a Limiter. The zero value means the defaults below.
type Options struct {
	// Fraction scales AWS's documented bucket sizes and refill rates
	// (awsquota.Buckets, or Buckets): 0.5 allows karpx half of the account's
	// budget. It must be in (0, 1]; zero means DefaultFraction.
	Fraction float64
	// Buckets overrides AWS's documented buckets per category, before
	// Fraction applies (accounts with raised limits). Missing categories
	// keep awsquota.Buckets' values.
	Buckets map[awsquota.Category]awsquota.Bucket
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
	// AdaptiveRecovery and, until AWS first throttles its action, by
	// 1/size of the way with every unthrottled answer (a slow start).
	// Zero means DefaultAdaptiveStart; 1 starts at the configured rate.
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
	// passThrough lets every call through without taking tokens (metrics
	// and Snapshot still count them). Only this package's tests set it
	// (WithoutBuckets in export_test.go), to show what the same burst does
	// without the budget; no flag or field outside the package reaches it.
	passThrough bool
}

// AddFlags registers --aws-api-budget-fraction and
// --aws-api-budget-adaptive-disabled on fs, bound to o.Fraction and
// o.AdaptiveDisabled. The budget itself has no off switch: an account with
// raised limits raises the fraction (up to 1, AWS's documented defaults).
func (o *Options) AddFlags(fs *flag.FlagSet) {
	if o.Fraction == 0 {
		o.Fraction = DefaultFraction
	}
	fs.Float64Var(&o.Fraction, "aws-api-budget-fraction", o.Fraction,
		"share of AWS's documented EC2/SSM request token buckets (size and refill rate) karpx may use, in (0, 1]")
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

// Limiter keeps the client-side buckets of the EC2 and SSM operations of
// ec2api.API. AddToStack installs it on an SDK client's middleware stack
// (ec2api.Config.APIOptions): every call of those operations, and every
// SDK retry, then takes a token first, so karpx never sends more than
// Options.Fraction of AWS's documented request rates. Other operations
// pass through. It is safe for concurrent use.
type Limiter struct {
	opts    Options
	log     logr.Logger
	buckets map[bucketKey]*bucket
	order   []*bucket // buckets sorted by category, then action
	stats   map[bucketKey]*counters
	metrics *metrics
}

// Validate reports options New cannot use: a Fraction outside (0, 1] or
// a SpeculativeReserve of 1 or more. Call it where flags are parsed.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// New returns a Limiter with the buckets of opts. It panics when
// opts.Validate fails, a programming error.
func New(opts Options) *Limiter {
	opts, err := opts.withDefaults()
	if err != nil {
		panic(fmt.Sprintf("budget.New: %v", err))
	}
	aws := awsquota.Buckets()
	for c, b := range opts.Buckets {
		aws[c] = b
	}
	l := &Limiter{opts: opts, log: opts.Logger.WithName("budget"),
		buckets: map[bucketKey]*bucket{}, stats: map[bucketKey]*counters{}}
	for _, k := range budgetedKeys() {
		cat, _ := awsquota.CategoryOf(k.action, k.unfiltered)
		b := newBucket(k.action, cat, k.unfiltered, aws[cat], opts.Fraction, &opts)
		if !b.adaptOff && opts.AdaptiveStart < 1 {
			b.startAdaptation(opts.AdaptiveStart, opts.Clock.Now())
		}
		l.buckets[k], l.stats[k] = b, &counters{}
		l.order = append(l.order, b)
	}
	sort.SliceStable(l.order, func(i, j int) bool { return l.order[i].category < l.order[j].category })
	l.metrics = newMetrics(opts.Registerer, func() []*bucket { return l.order })
	return l
}
