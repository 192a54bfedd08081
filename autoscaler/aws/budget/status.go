package budget

import (
	"encoding/json"
	"net/http"

	"github.com/karpx/karpx/autoscaler/aws/budget/budgetstatus"
)

// HandlerPath is the path the operator mounts Handler on, next to /metrics
// on the controller's metrics server, and the path `kubectl karpx
// throttle` reads (budgetstatus.Path).
const HandlerPath = budgetstatus.Path

// Snapshot returns the current budgetstatus.Status.
func (l *Limiter) Snapshot() budgetstatus.Status {
	st := budgetstatus.Status{Time: l.opts.Clock.Now(), Enabled: !l.opts.passThrough, Fraction: l.opts.Fraction}
	var cat *budgetstatus.CategoryStatus
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
		counts := budgetstatus.Counts{Requests: c.requests, Throttled: c.throttled, Retries: c.retries,
			Errors: c.errors, QuotaErrors: c.quotaErrors, Exhausted: c.exhausted}
		waits := append([]float64(nil), c.waits...)
		c.mu.Unlock()
		tokens := b.tokens()
		factor, size, refill, slowdowns, last := b.adaptation(st.Time)
		adaptive := budgetstatus.Adaptive{Factor: factor, Size: size, RefillPerSecond: refill, Slowdowns: slowdowns}
		if !last.IsZero() {
			adaptive.LastSlowdown = &last
		}
		if cat == nil || cat.Category != b.category {
			flush()
			cat = &budgetstatus.CategoryStatus{Category: b.category, Size: b.spec.Size, RefillPerSecond: b.spec.RefillPerSecond, Tokens: tokens, AdaptiveFactor: 1}
			catWaits = nil
		}
		cat.Tokens = min(cat.Tokens, tokens)
		cat.AdaptiveFactor = min(cat.AdaptiveFactor, factor)
		cat.Slowdowns += slowdowns
		cat.Add(counts)
		catWaits = append(catWaits, waits...)
		st.Totals.Add(counts)
		st.Actions = append(st.Actions, budgetstatus.ActionStatus{Action: b.action, Category: b.category, Size: b.spec.Size,
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
