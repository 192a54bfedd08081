package throttle

import "time"

// The types below decode the JSON of the controller's /throttle endpoint
// (budget.Status in autoscaler/providers/budget). They are mirrored rather
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
	// Counts add up the category's buckets.
	Counts
	// WaitP99Seconds is the 99th percentile client-side wait in seconds.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
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
	// Counts are the bucket's counters.
	Counts
	// WaitP50Seconds is the median client-side wait in seconds.
	WaitP50Seconds float64 `json:"waitP50Seconds"`
	// WaitP99Seconds is the 99th percentile client-side wait in seconds.
	WaitP99Seconds float64 `json:"waitP99Seconds"`
}
