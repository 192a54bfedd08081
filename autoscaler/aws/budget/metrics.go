package budget

import (
	"errors"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, all labelled with the action ("DescribeInstances",
// "GetParameter", ...).
const (
	// MetricRequests counts calls sent to the SDK (after their token).
	MetricRequests = "karpx_aws_api_requests_total"
	// MetricErrors counts calls that failed, by AWS error code ("code");
	// errors without one are labelled RetryQuotaExceeded, Canceled or
	// ClientError.
	MetricErrors = "karpx_aws_api_errors_total"
	// MetricThrottled counts throttled answers (RequestLimitExceeded,
	// ThrottlingException and the SDK's other throttle codes), one per
	// attempt.
	MetricThrottled = "karpx_aws_api_throttled_total"
	// MetricRetries counts SDK attempts beyond the first of each call.
	MetricRetries = "karpx_aws_api_retries_total"
	// MetricRetryQuotaExceeded counts calls the SDK's standard retryer gave
	// up on with "failed to get rate limit token, retry quota exceeded".
	MetricRetryQuotaExceeded = "karpx_aws_api_retry_quota_exceeded_total"
	// MetricWaitSeconds is a histogram of the time, in seconds, calls and
	// their retries waited for a client-side token, by "priority".
	MetricWaitSeconds = "karpx_aws_api_budget_wait_seconds"
	// MetricExhausted counts Speculative calls refused with
	// *ExhaustedError, by "priority".
	MetricExhausted = "karpx_aws_api_budget_exhausted_total"
	// MetricTokens is a gauge of the tokens in each client-side bucket at
	// scrape time, by "category" (the bucket's throttling category).
	MetricTokens = "karpx_aws_api_budget_tokens"
)

// metrics are the Prometheus collectors of a Limiter.
type metrics struct {
	requests, throttled, retries, quota *prometheus.CounterVec
	errors, exhausted                   *prometheus.CounterVec
	wait                                *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, buckets func() []*bucket) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRequests,
			Help: "AWS API calls sent to the SDK after taking a client-side token, by action."}, []string{"action"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricErrors,
			Help: "AWS API calls that failed, by action and AWS error code."}, []string{"action", "code"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricThrottled,
			Help: "Throttled AWS answers (RequestLimitExceeded and other throttle codes), per attempt, by action."}, []string{"action"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRetries,
			Help: "SDK retry attempts (attempts beyond the first), by action."}, []string{"action"}),
		quota: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRetryQuotaExceeded,
			Help: "Calls failed by the SDK's standard retryer with 'retry quota exceeded', by action."}, []string{"action"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricWaitSeconds,
			Help:    "Seconds AWS API calls and their retries waited for a client-side token, by action and priority.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}, []string{"action", "priority"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricExhausted,
			Help: "Speculative AWS API calls refused because the client-side budget was exhausted, by action."}, []string{"action", "priority"}),
	}
	if reg == nil {
		return m
	}
	m.requests = register(reg, m.requests)
	m.errors = register(reg, m.errors)
	m.throttled = register(reg, m.throttled)
	m.retries = register(reg, m.retries)
	m.quota = register(reg, m.quota)
	m.wait = register(reg, m.wait)
	m.exhausted = register(reg, m.exhausted)
	// A second Limiter on the same registry keeps the first one's gauge.
	_ = reg.Register(tokensCollector{
		desc:    prometheus.NewDesc(MetricTokens, "Tokens in the client-side bucket of each AWS API action, by action and throttling category.", []string{"action", "category"}, nil),
		buckets: buckets,
	})
	return m
}

// register registers c on reg, or returns the collector already
// registered under its name, so several APIs can share a registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// tokensCollector reports MetricTokens at scrape time.
type tokensCollector struct {
	desc    *prometheus.Desc
	buckets func() []*bucket
}

func (c tokensCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c tokensCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.buckets() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, b.tokens(), b.action, string(b.category))
	}
}

// waitSamples is the number of recent waits kept per bucket for the
// quantiles of Status.
const waitSamples = 1024

// counters are the in-process counts behind Status, per bucket.
type counters struct {
	mu                                                           sync.Mutex
	requests, throttled, retries, errors, quotaErrors, exhausted int64
	waits                                                        []float64 // ring of the last waitSamples waits, seconds
	next                                                         int
}

func (c *counters) add(f func(c *counters)) {
	c.mu.Lock()
	f(c)
	c.mu.Unlock()
}

func (c *counters) observeWait(seconds float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waits) < waitSamples {
		c.waits = append(c.waits, seconds)
		return
	}
	c.waits[c.next] = seconds
	c.next = (c.next + 1) % waitSamples
}

// quantile returns the q-quantile (0 ≤ q ≤ 1) of samples, nearest rank, or 0
// when there are none. samples is sorted in place.
func quantile(samples []float64, q float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	i := int(q*float64(len(samples))+0.5) - 1
	return samples[min(max(i, 0), len(samples)-1)]
}
