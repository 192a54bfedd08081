package budget

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/karpx/karpx/catalog/awsquota"
)

// HandlerPath is the path the lead mounts Handler on, next to /metrics on
// the controller's metrics server, and the path `kubectl karpx throttle`
// reads.
const HandlerPath = "/throttle"

// Counts are the counters of a bucket, a category or all of them.
type Counts struct {
	// Requests is the number of calls sent to the SDK.
	Requests int64 `json:"requests"`
	// Throttled is the number of throttled answers from AWS, per attempt.
	Throttled int64 `json:"throttled"`
	// Retries is the number of SDK attempts beyond the first.
	Retries int64 `json:"retries"`
	// Errors is the number of calls that failed.
	Errors int64 `json:"errors"`
	// QuotaErrors is the number of calls failed with the SDK's "retry quota
	// exceeded" error.
	QuotaErrors int64 `json:"quotaErrors"`
	// Exhausted is the number of Speculative calls refused with
	// *ExhaustedError (never sent).
	Exhausted int64 `json:"exhausted"`
}

func (c *Counts) add(o Counts) {
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
	// Counts are the bucket's counters since the Limiter was created.
	Counts
	// WaitP50Seconds and WaitP99Seconds are quantiles of the client-side
	// wait, in seconds, of the bucket's last 1,024 tokens.
	WaitP50Seconds float64 `json:"waitP50Seconds"`
	// WaitP99Seconds: see WaitP50Seconds.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
}

// Adaptive is the state of a bucket that slows down when AWS throttles
// its action (see adaptive.go).
type Adaptive struct {
	// Factor is the share, in (0, 1], of the configured size and refill
	// rate the bucket runs at now; 1 means not slowed down.
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
	// buckets: 1 when none is slowed down.
	AdaptiveFactor float64 `json:"adaptiveFactor"`
	// Slowdowns adds up the category's Adaptive.Slowdowns.
	Slowdowns int64 `json:"slowdowns"`
	// Counts add up the category's buckets.
	Counts
	// WaitP99Seconds is the 99th percentile of the client-side wait, in
	// seconds, over the last 1,024 tokens of each of the category's buckets.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
}

// Status is a snapshot of a Limiter: its configuration, buckets and counters.
// It is the JSON Handler serves.
type Status struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// Enabled is false when Options.Disabled lets every call through.
	Enabled bool `json:"enabled"`
	// Fraction is the share of AWS's documented rates in use.
	Fraction float64 `json:"fraction"`
	// Categories has one entry per throttling category karpx calls, sorted.
	Categories []CategoryStatus `json:"categories"`
	// Actions has one entry per bucket, sorted by category then action.
	Actions []ActionStatus `json:"actions"`
	// Totals add up every bucket.
	Totals Counts `json:"totals"`
}

// Snapshot returns the current Status.
func (l *Limiter) Snapshot() Status {
	st := Status{Time: l.opts.Clock.Now(), Enabled: !l.opts.Disabled, Fraction: l.opts.Fraction}
	var cat *CategoryStatus
	var catWaits []float64
	flush := func() {
		if cat != nil {
			cat.WaitP99Seconds = quantile(catWaits, 0.99)
			st.Categories = append(st.Categories, *cat)
		}
	}
	for _, b := range l.order { // sorted by category
		c := l.stats[bucketKey{b.action, b.unfiltered}]
		c.mu.Lock()
		counts := Counts{Requests: c.requests, Throttled: c.throttled, Retries: c.retries,
			Errors: c.errors, QuotaErrors: c.quotaErrors, Exhausted: c.exhausted}
		waits := append([]float64(nil), c.waits...)
		c.mu.Unlock()
		tokens := b.tokens()
		factor, size, refill, slowdowns, last := b.adaptation(st.Time)
		adaptive := Adaptive{Factor: factor, Size: size, RefillPerSecond: refill, Slowdowns: slowdowns}
		if !last.IsZero() {
			adaptive.LastSlowdown = &last
		}
		if cat == nil || cat.Category != b.category {
			flush()
			cat = &CategoryStatus{Category: b.category, Size: b.spec.Size, RefillPerSecond: b.spec.RefillPerSecond, Tokens: tokens, AdaptiveFactor: 1}
			catWaits = nil
		}
		cat.Tokens = min(cat.Tokens, tokens)
		cat.AdaptiveFactor = min(cat.AdaptiveFactor, factor)
		cat.Slowdowns += slowdowns
		cat.add(counts)
		catWaits = append(catWaits, waits...)
		st.Totals.add(counts)
		st.Actions = append(st.Actions, ActionStatus{Action: b.action, Category: b.category, Size: b.spec.Size,
			RefillPerSecond: b.spec.RefillPerSecond, Tokens: tokens, Adaptive: adaptive, Counts: counts,
			WaitP50Seconds: quantile(waits, 0.5), WaitP99Seconds: quantile(waits, 0.99)})
	}
	flush()
	return st
}

// Handler serves Snapshot as JSON to GET and HEAD requests, on any path;
// mount it at HandlerPath.
func (l *Limiter) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.MarshalIndent(l.Snapshot(), "", "  ")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	})
}
