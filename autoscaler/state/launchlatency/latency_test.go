package launchlatency

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// histogram returns MetricPodToLaunch's sample count and sum, as the
// manager's /metrics serves them.
func histogram(t *testing.T) (uint64, float64) {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == MetricPodToLaunch {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("%s is not registered", MetricPodToLaunch)
	return 0, 0
}

// TestObservesPodToLaunch: pods a and b, seen at 0 s and 1 s (a seen again
// at 2 s: the first sighting counts), are planned onto nc-1 at 3 s, whose
// CreateFleet, merged by the batcher with another caller's, is issued at
// 5 s: the histogram gets 5 s and 4 s, once (a retried CreateFleet adds
// nothing). Pod c, seen but never planned, is not observed, and KeepOnly
// forgets it once it is no longer pending.
func TestObservesPodToLaunch(t *testing.T) {
	start := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	now := start
	var samples []float64
	tr := New(func(s float64) { samples = append(samples, s) })
	clk := clocktesting.NewFakeClock(now)
	tr.clk = clk
	at := func(sec float64) { clk.SetTime(start.Add(time.Duration(sec * float64(time.Second)))) }
	a, b, c := types.NamespacedName{Namespace: "default", Name: "a"}, types.NamespacedName{Namespace: "default", Name: "b"}, types.NamespacedName{Namespace: "default", Name: "c"}

	count0, sum0 := histogram(t)
	tr.Seen(a)
	at(1)
	tr.Seen(b)
	tr.Seen(c)
	at(2)
	tr.Seen(a)
	at(3)
	tr.Planned("nc-1", []types.NamespacedName{a, b})
	launch := tr.ForLaunch(context.Background(), "nc-1")
	other := tr.ForLaunch(context.Background(), "nc-unknown")
	merged := Merge(context.Background(), other, launch)
	at(5)
	Issued(context.Background()) // a call without launches observes nothing
	Issued(merged)
	Issued(launch) // a retry of the same launch
	slices.Sort(samples)
	if !slices.Equal(samples, []float64{4, 5}) {
		t.Fatalf("samples %v, want [4 5]", samples)
	}
	count, sum := histogram(t)
	if count-count0 != 2 || sum-sum0 != 9 {
		t.Fatalf("histogram gained %d samples summing %g s, want 2 summing 9 s", count-count0, sum-sum0)
	}
	if _, ok := tr.seen[c]; !ok {
		t.Fatal("pod c, still pending, was forgotten")
	}
	tr.KeepOnly(map[types.NamespacedName]bool{})
	if len(tr.seen) != 0 || len(tr.claims) != 0 {
		t.Fatalf("left seen %v, claims %v", tr.seen, tr.claims)
	}
}

// TestNilTracker: a nil Tracker (latency not measured) ignores every call.
func TestNilTracker(t *testing.T) {
	var tr *Tracker
	tr.Seen(types.NamespacedName{Name: "a"})
	tr.Planned("nc", []types.NamespacedName{{Name: "a"}})
	tr.KeepOnly(nil)
	ctx := context.Background()
	if tr.ForLaunch(ctx, "nc") != ctx {
		t.Fatal("ForLaunch of a nil Tracker changed the context")
	}
	Issued(ctx)
}
