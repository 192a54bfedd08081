package budgetstatus

import (
	"fmt"
	"time"

	"github.com/karpx/karpx/catalog/awsquota"
)

// Path is where the controller serves Status, next to /metrics on its
// metrics server, and the path `kubectl karpx throttle` reads.
const Path = "/throttle"

// Counts are the counters of a bucket, a category or all of them.
type Counts struct {
	// Requests is the number of calls sent to the SDK (to AWS).
	Requests int64 `json:"requests"`
	// Throttled is the number of throttled answers from AWS
	// (RequestLimitExceeded), per attempt.
	Throttled int64 `json:"throttled"`
	// Retries is the number of SDK attempts beyond the first.
	Retries int64 `json:"retries"`
	// Errors is the number of calls that failed.
	Errors int64 `json:"errors"`
	// QuotaErrors is the number of calls failed with the SDK's "retry quota
	// exceeded" error.
	QuotaErrors int64 `json:"quotaErrors"`
	// Exhausted is the number of Speculative calls refused client-side
	// (budget.ExhaustedError; never sent).
	Exhausted int64 `json:"exhausted"`
}

// Add adds o's counters to c's.
func (c *Counts) Add(o Counts) {
	c.Requests += o.Requests
	c.Throttled += o.Throttled
	c.Retries += o.Retries
	c.Errors += o.Errors
	c.QuotaErrors += o.QuotaErrors
	c.Exhausted += o.Exhausted
}

// ActionStatus is the state of the client-side bucket of one action (for
// DescribeInstances and DescribeSecurityGroups, one of their two buckets).
type ActionStatus struct {
	// Action is the EC2 or SSM action, e.g. "CreateFleet".
	Action string `json:"action"`
	// Category is the throttling category of the bucket.
	Category awsquota.Category `json:"category"`
	// Size is the bucket's capacity, in requests, after Fraction.
	Size float64 `json:"size"`
	// RefillPerSecond is the bucket's refill rate, in requests per second,
	// after Fraction.
	RefillPerSecond float64 `json:"refillPerSecond"`
	// Tokens is the number of tokens in the bucket now.
	Tokens float64 `json:"tokens"`
	// Adaptive is the bucket's adaptation to throttled answers.
	Adaptive Adaptive `json:"adaptive"`
	// Counts are the bucket's counters since the controller started.
	Counts
	// WaitP50Seconds and WaitP99Seconds are quantiles of the client-side
	// wait, in seconds, of the bucket's last 1,024 tokens.
	WaitP50Seconds float64 `json:"waitP50Seconds"`
	// WaitP99Seconds: see WaitP50Seconds.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
}

// Adaptive is the state of a bucket that slows down when AWS throttles
// its action (package budget's adaptive.go).
type Adaptive struct {
	// Factor is the share, in (0, 1], of the configured size and refill
	// rate the bucket runs at now; 1 means not slowed down, 0 is what a
	// controller without adaptive buckets (older karpx) serves.
	Factor float64 `json:"factor"`
	// Size is the bucket's capacity now, in requests.
	Size float64 `json:"size"`
	// RefillPerSecond is the bucket's refill rate now, in requests per
	// second.
	RefillPerSecond float64 `json:"refillPerSecond"`
	// Slowdowns is the number of times the bucket slowed down after a
	// throttled answer.
	Slowdowns int64 `json:"slowdowns"`
	// LastSlowdown is the time of the last slow-down, if any.
	LastSlowdown *time.Time `json:"lastSlowdown,omitempty"`
}

// CategoryStatus sums the buckets of one category.
type CategoryStatus struct {
	// Category is the throttling category.
	Category awsquota.Category `json:"category"`
	// Size is the capacity of each bucket of the category, in requests,
	// after Fraction (EC2 gives every action its own bucket).
	Size float64 `json:"size"`
	// RefillPerSecond is the refill rate of each bucket, in requests per
	// second, after Fraction.
	RefillPerSecond float64 `json:"refillPerSecond"`
	// Tokens is the lowest number of tokens among the category's buckets
	// now: the bucket closest to running dry.
	Tokens float64 `json:"tokens"`
	// AdaptiveFactor is the lowest Adaptive.Factor among the category's
	// buckets: 1 when none is slowed down; 0 from a controller without
	// adaptive buckets.
	AdaptiveFactor float64 `json:"adaptiveFactor"`
	// Slowdowns adds up the category's Adaptive.Slowdowns.
	Slowdowns int64 `json:"slowdowns"`
	// Counts add up the category's buckets.
	Counts
	// WaitP99Seconds is the 99th percentile of the client-side wait, in
	// seconds, over the last 1,024 tokens of each of the category's buckets.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
}

// Status is a snapshot of the controller's budget.Limiter: its
// configuration, buckets and counters, as served at Path.
type Status struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// Enabled is true from every current controller: the budget has no
	// off switch. Controllers of earlier releases reported false under
	// --aws-api-budget-disabled, and kubectl karpx throttle still reads
	// them.
	Enabled bool `json:"enabled"`
	// Fraction is the share of AWS's documented request rates the
	// buckets allow, e.g. 0.5.
	Fraction float64 `json:"fraction"`
	// Categories has one entry per throttling category karpx calls, sorted.
	Categories []CategoryStatus `json:"categories"`
	// Actions has one entry per bucket, sorted by category then action.
	Actions []ActionStatus `json:"actions"`
	// Totals add up every bucket.
	Totals Counts `json:"totals"`
}

// Summary is a one-line account of the budget, for `kubectl karpx status`:
// whether it is on and at which share of AWS's rates, and the totals of
// requests, throttled answers, retries and retry-quota errors.
func (st *Status) Summary() string {
	budget := "client-side budget off"
	if st.Enabled {
		budget = fmt.Sprintf("client-side budget at %.0f%% of AWS's rates", 100*st.Fraction)
	}
	return fmt.Sprintf("%s; %d requests, %d throttled, %d retries, %d retry-quota errors",
		budget, st.Totals.Requests, st.Totals.Throttled, st.Totals.Retries, st.Totals.QuotaErrors)
}
