package hydration

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Source is a data set a Hydrator loads and refreshes.
type Source struct {
	// Name is the data set (or the first of the sets) it refreshes, for logs.
	Name string
	// Refresh loads the data and reports to the Registry itself; it
	// returns the refresh's error.
	Refresh func(ctx context.Context) error
	// Period is the refresh period after hydration; 0 refreshes never
	// (the provider refreshes on demand).
	Period time.Duration
}

// Hydrator loads Sources at start and refreshes them. It runs on every
// replica (a standby needs its data too when it becomes leader).
type Hydrator struct {
	sources []Source
	log     logr.Logger
	// RetryBase and RetryMax bound the backoff between failed loads
	// (doubling per failure). Defaults 1s and 30s.
	RetryBase, RetryMax time.Duration
	// Clock times the loads, the retry backoff and the refresh ticker.
	// Default clock.RealClock; tests may set a k8s.io/utils/clock/testing
	// fake before Start.
	Clock clock.WithTicker
}

var _ manager.LeaderElectionRunnable = (*Hydrator)(nil)

// NewHydrator returns a Hydrator of sources logging to log.
func NewHydrator(log logr.Logger, sources ...Source) *Hydrator {
	return &Hydrator{sources: sources, log: log.WithName("hydration"), RetryBase: time.Second, RetryMax: 30 * time.Second, Clock: clock.RealClock{}}
}

// NeedLeaderElection is false: every replica hydrates.
func (h *Hydrator) NeedLeaderElection() bool { return false }

// Start loads every source concurrently, retrying each with backoff until
// it succeeds, then refreshes it every Period, until ctx ends.
func (h *Hydrator) Start(ctx context.Context) error {
	done := make(chan struct{}, len(h.sources))
	for _, s := range h.sources {
		go func() {
			defer func() { done <- struct{}{} }()
			h.run(ctx, s)
		}()
	}
	for range h.sources {
		<-done
	}
	return nil
}

func (h *Hydrator) run(ctx context.Context, s Source) {
	wait := h.RetryBase
	for {
		start := h.Clock.Now()
		err := s.Refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			h.log.Info("hydrated", "dataSet", s.Name, "took", h.Clock.Since(start).Round(time.Millisecond).String())
			break
		}
		h.log.Info("hydrating failed; retrying", "dataSet", s.Name, "transient", true, "retryIn", wait.String(), "error", err.Error())
		if !sleep(ctx, h.Clock, wait) {
			return
		}
		wait = min(2*wait, h.RetryMax)
	}
	if s.Period <= 0 {
		return
	}
	t := h.Clock.NewTicker(s.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				h.log.Info("refresh failed; serving the last good data", "dataSet", s.Name, "transient", true, "error", err.Error())
			}
		}
	}
}

// sleep waits d on clk, or until ctx ends (false).
func sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// gated is a Runnable that starts once its data sets are hydrated.
type gated struct {
	reg   *Registry
	names []string
	inner manager.Runnable
	log   logr.Logger
}

// After returns a Runnable that waits until every named data set is
// hydrated, then runs inner. It keeps inner's leader-election need.
func After(reg *Registry, inner manager.Runnable, log logr.Logger, names ...string) manager.Runnable {
	return &gated{reg: reg, names: names, inner: inner, log: log}
}

func (g *gated) Start(ctx context.Context) error {
	if !g.reg.Hydrated(g.names...) {
		g.log.Info("waiting for cloud data before starting", "dataSets", g.names)
		if err := g.reg.Wait(ctx, g.names...); err != nil {
			return nil // shutdown before hydration
		}
		g.log.Info("cloud data hydrated; starting", "dataSets", g.names)
	}
	return g.inner.Start(ctx)
}

func (g *gated) NeedLeaderElection() bool {
	if l, ok := g.inner.(manager.LeaderElectionRunnable); ok {
		return l.NeedLeaderElection()
	}
	return true
}
