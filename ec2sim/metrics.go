package ec2sim

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ActionStats are the counters of one action.
type ActionStats struct {
	// Requests is the number of calls, every answer included.
	Requests int64 `json:"requests"`
	// Throttled is the number of RequestLimitExceeded (EC2) or
	// ThrottlingException (SSM) answers from the token buckets.
	Throttled int64 `json:"throttled"`
	// Errors is the number of error answers, throttled ones and injected
	// faults included.
	Errors int64 `json:"errors"`
}

// metrics owns the simulator's Prometheus registry (never the global one)
// and the counters behind Counts and /_sim/counts.
type metrics struct {
	registry *prometheus.Registry

	requests       *prometheus.CounterVec
	throttled      *prometheus.CounterVec
	errors         *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	faultsInjected *prometheus.CounterVec
	launched       *prometheus.CounterVec
	fleetErrors    *prometheus.CounterVec
	nodes          *prometheus.CounterVec

	mu        sync.Mutex
	perAction map[string]*ActionStats
}

func newMetrics(s *Simulator) *metrics {
	m := &metrics{registry: prometheus.NewRegistry(), perAction: map[string]*ActionStats{}}
	labels := []string{"service", "action"}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ec2sim_api_requests_total",
		Help: "API calls answered, by service and action, every answer included."}, labels)
	m.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ec2sim_api_throttled_total",
		Help: "API calls refused by the request token buckets."}, labels)
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ec2sim_api_errors_total",
		Help: "API calls answered with an error, by error code."}, append(labels, "code"))
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ec2sim_api_request_duration_seconds",
		Help: "Time to answer an API call in seconds, injected latency included.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}, labels)
	m.faultsInjected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ec2sim_faults_injected_total",
		Help: "Error answers injected by fault rules."}, []string{"action", "code"})
	m.launched = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ec2sim_instances_launched_total",
		Help: "Instances launched, by instance type, zone and capacity type."}, []string{"instance_type", "zone", "capacity_type"})
	m.fleetErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ec2sim_fleet_errors_total",
		Help: "Per-override errors in CreateFleet's errorSet, by error code."}, []string{"code"})
	m.nodes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ec2sim_nodes_total",
		Help: "Node objects created or deleted by the kubelet emulation."}, []string{"event"})
	instances := prometheus.NewDesc("ec2sim_instances", "Instances currently visible, by state and capacity type.",
		[]string{"state", "capacity_type"}, nil)
	m.registry.MustRegister(m.requests, m.throttled, m.errors, m.duration, m.faultsInjected, m.launched, m.fleetErrors, m.nodes,
		instanceCollector{s: s, desc: instances})
	return m
}

func (m *metrics) observe(svc service, action string, d time.Duration, apiErr *APIError, throttled bool) {
	m.requests.WithLabelValues(string(svc), action).Inc()
	m.duration.WithLabelValues(string(svc), action).Observe(d.Seconds())
	m.mu.Lock()
	st := m.perAction[action]
	if st == nil {
		st = &ActionStats{}
		m.perAction[action] = st
	}
	st.Requests++
	if apiErr != nil {
		st.Errors++
	}
	if throttled {
		st.Throttled++
	}
	m.mu.Unlock()
	if apiErr != nil {
		m.errors.WithLabelValues(string(svc), action, apiErr.Code).Inc()
	}
	if throttled {
		m.throttled.WithLabelValues(string(svc), action).Inc()
	}
}

func (m *metrics) counts() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.perAction))
	for k, v := range m.perAction {
		out[k] = v.Requests
	}
	return out
}

func (m *metrics) stats() map[string]ActionStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]ActionStats, len(m.perAction))
	for k, v := range m.perAction {
		out[k] = *v
	}
	return out
}

func (m *metrics) resetStats() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.perAction = map[string]*ActionStats{}
}

// instanceCollector reports instance counts at scrape time.
type instanceCollector struct {
	s    *Simulator
	desc *prometheus.Desc
}

func (c instanceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c instanceCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ state, ct string }
	n := map[key]int{}
	for _, in := range c.s.Instances() {
		n[key{in.State, in.CapacityType}]++
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), k.state, k.ct)
	}
}
