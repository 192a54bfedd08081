package batcher

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, labelled with the batcher ("CreateFleet",
// "DescribeInstances", "TerminateInstances").
const (
	// MetricBatchSize is a histogram of the number of requests merged into
	// one call.
	MetricBatchSize = "karpx_aws_batcher_batch_size"
	// MetricWindowSeconds is a histogram of the time, in seconds, from a
	// batch's first request to its call.
	MetricWindowSeconds = "karpx_aws_batcher_window_seconds"
)

// Metrics are the collectors shared by the batchers of an API.
type Metrics struct {
	size, window *prometheus.HistogramVec
}

// NewMetrics returns the batchers' metrics, registered on reg unless it is
// nil. Collectors already registered on reg (by another API) are reused.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		size: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricBatchSize,
			Help:    "Number of requests merged into one AWS API call, by batcher.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}}, []string{"batcher"}),
		window: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricWindowSeconds,
			Help:    "Seconds from the first request of a batch to its AWS API call, by batcher.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 10)}, []string{"batcher"}),
	}
	if reg != nil {
		m.size = register(reg, m.size)
		m.window = register(reg, m.window)
	}
	return m
}

func register(reg prometheus.Registerer, c *prometheus.HistogramVec) *prometheus.HistogramVec {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.HistogramVec); ok {
				return existing
			}
		}
	}
	return c
}
