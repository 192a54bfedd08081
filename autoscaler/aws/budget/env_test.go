package budget_test

import (
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
)

// limited is a client of a simulator with a Limiter on its stack: the
// client's EC2 and SSM methods and the Limiter's Snapshot and Handler.
type limited struct {
	*ec2api.Client
	*budget.Limiter
}

// newLimited returns a new client of e's simulator with a Limiter of opts
// installed through ec2api.Config.APIOptions, as the operator does.
func newLimited(t testing.TB, e *ec2apitest.Env, opts budget.Options) limited {
	t.Helper()
	l := budget.New(opts)
	return limited{Client: e.NewClient(t, ec2api.Config{APIOptions: []func(*middleware.Stack) error{l.AddToStack}}), Limiter: l}
}

// fastRetries is a per-call option with the SDK's standard retryer (retry
// quota included) and a 1ms backoff, so tests that retry do not sleep.
func fastRetries(maxAttempts int, opts ...func(*retry.StandardOptions)) func(*ec2.Options) {
	return func(o *ec2.Options) {
		o.HTTPClient = ec2apitest.LoopbackHTTP
		o.Retryer = retry.NewStandard(append([]func(*retry.StandardOptions){func(so *retry.StandardOptions) {
			so.MaxAttempts = maxAttempts
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		}}, opts...)...)
	}
}

// metricValue returns the value of the counter or gauge name whose labels
// include want, summed over matching series.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// newFakeClock returns a fake clock at a fixed date, for the budget and the
// simulator of a test.
func newFakeClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// waitUntil polls cond until it holds. Tests on a fake clock use it to let
// goroutines reach a state the clock alone cannot change (a call queued at
// the budget, a burst answered); the minute's deadline only stops a hung
// test, the outcome does not depend on it.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: not %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// whileQueued starts call, waits until l holds queued calls of action
// (call's among them), runs then (a step of the fake clock, a cancel) and
// returns call's error.
func whileQueued(t testing.TB, l *budget.Limiter, action string, queued int, call func() error, then func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	waitUntil(t, fmt.Sprintf("%d calls of %s queued", queued, action), func() bool { return l.Queued(action) == queued })
	then()
	return <-done
}
