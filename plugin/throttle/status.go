package throttle

import "time"

// The types below decode the JSON of the controller's /throttle endpoint
// (budget.Status in autoscaler/aws/budget). They are mirrored rather
// than imported so the plugin does not link the AWS SDK; a test keeps the
// two in step.

// Status is the controller's client-side EC2 API budget.
type Status struct {
	// Time is when the controller took the snapshot.
	Time time.Time `json:"time"`
	// Enabled is false when the controller runs without client-side
	// buckets (--aws-api-budget-disabled).
	Enabled bool `json:"enabled"`
	// Fraction is the share of AWS's documented request rates the buckets
	// allow, e.g. 0.5.
	Fraction float64 `json:"fraction"`
	// Categories has one entry per throttling category.
	Categories []CategoryStatus `json:"categories"`
	// Actions has one entry per client-side bucket.
	Actions []ActionStatus `json:"actions"`
	// Totals add up every bucket.
	Totals Counts `json:"totals"`
}

// Counts are the counters of a bucket, a category or all of them.
type Counts struct {
	// Requests is the number of calls sent to AWS.
	Requests int64 `json:"requests"`
	// Throttled is the number of throttled answers (RequestLimitExceeded).
	Throttled int64 `json:"throttled"`
	// Retries is the number of SDK attempts beyond the first.
	Retries int64 `json:"retries"`
	// Errors is the number of failed calls.
	Errors int64 `json:"errors"`
	// QuotaErrors is the number of calls failed with the SDK's "retry
	// quota exceeded".
	QuotaErrors int64 `json:"quotaErrors"`
	// Exhausted is the number of speculative calls refused client-side.
	Exhausted int64 `json:"exhausted"`
}

// CategoryStatus is one throttling category.
type CategoryStatus struct {
	// Category is the category name, e.g. "non-mutating".
	Category string `json:"category"`
	// Size is each bucket's capacity in requests.
	Size float64 `json:"size"`
	// RefillPerSecond is each bucket's refill rate in requests per second.
	RefillPerSecond float64 `json:"refillPerSecond"`
	// Tokens is the lowest token count among the category's buckets.
	Tokens float64 `json:"tokens"`
	// AdaptiveFactor is the lowest share, in (0, 1], of their configured
	// rate the category's buckets run at after slowing down on throttled
	// answers; 0 from controllers without an adaptive budget.
	AdaptiveFactor float64 `json:"adaptiveFactor"`
	// Slowdowns is the number of slow-downs of the category's buckets.
	Slowdowns int64 `json:"slowdowns"`
	// Counts add up the category's buckets.
	Counts
	// WaitP99Seconds is the 99th percentile client-side wait in seconds.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
}

// Adaptive is a bucket's adaptation to throttled answers.
type Adaptive struct {
	// Factor is the share, in (0, 1], of the configured size and refill
	// rate the bucket runs at now; 0 from controllers without one.
	Factor float64 `json:"factor"`
	// Size is the bucket's capacity now, in requests.
	Size float64 `json:"size"`
	// RefillPerSecond is the bucket's refill rate now, in requests per second.
	RefillPerSecond float64 `json:"refillPerSecond"`
	// Slowdowns is the number of slow-downs after throttled answers.
	Slowdowns int64 `json:"slowdowns"`
	// LastSlowdown is the time of the last slow-down, if any.
	LastSlowdown *time.Time `json:"lastSlowdown,omitempty"`
}

// ActionStatus is one client-side bucket.
type ActionStatus struct {
	// Action is the EC2 or SSM action.
	Action string `json:"action"`
	// Category is the bucket's throttling category.
	Category string `json:"category"`
	// Size is the bucket's capacity in requests.
	Size float64 `json:"size"`
	// RefillPerSecond is the bucket's refill rate in requests per second.
	RefillPerSecond float64 `json:"refillPerSecond"`
	// Tokens is the bucket's token count.
	Tokens float64 `json:"tokens"`
	// Adaptive is the bucket's adaptation to throttled answers.
	Adaptive Adaptive `json:"adaptive"`
	// Counts are the bucket's counters.
	Counts
	// WaitP50Seconds is the median client-side wait in seconds.
	WaitP50Seconds float64 `json:"waitP50Seconds"`
	// WaitP99Seconds is the 99th percentile client-side wait in seconds.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
}
