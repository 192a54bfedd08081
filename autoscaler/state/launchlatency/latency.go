package launchlatency

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricPodToLaunch is the histogram, in seconds, from a pod first seen
// pending by the provisioner to the CreateFleet call for its NodeClaim.
const MetricPodToLaunch = "karpx_provisioning_pod_to_launch_seconds"

// Buckets are MetricPodToLaunch's upper bounds in seconds: fine around
// Karpenter's default batch window (1 s idle, 10 s at most), then up to
// the 5-minute launch TTL.
var Buckets = []float64{0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 7.5, 10, 12.5, 15, 20, 30, 60, 120, 300}

// podToLaunch is registered on controller-runtime's metrics registry, which
// the manager serves on /metrics.
var podToLaunch = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    MetricPodToLaunch,
	Help:    "Seconds from a pod first seen pending by the provisioner to the CreateFleet call launching the NodeClaim it was planned onto.",
	Buckets: Buckets,
})

func init() { crmetrics.Registry.MustRegister(podToLaunch) }

// staleAfter drops pods of NodeClaims never launched (deleted before their
// launch) from memory: Karpenter's 15-minute registration TTL, well past
// the 5-minute launch TTL.
const staleAfter = 15 * time.Minute

// claim is a NodeClaim planned but not launched yet.
type claim struct {
	planned time.Time
	seen    []time.Time
}

// Tracker remembers when pending pods were first seen and which NodeClaim
// they were planned onto. The zero value is not usable; use New. A nil
// *Tracker ignores every call.
type Tracker struct {
	mu      sync.Mutex
	clk     clock.PassiveClock
	observe func(seconds float64)
	seen    map[types.NamespacedName]time.Time
	claims  map[string]*claim
}

// New returns a Tracker observing into MetricPodToLaunch and, when hook is
// not nil, calling hook with each observation in seconds too (tests and
// benchmarks read exact samples through it).
func New(hook func(seconds float64)) *Tracker {
	observe := podToLaunch.Observe
	if hook != nil {
		observe = func(s float64) { podToLaunch.Observe(s); hook(s) }
	}
	return &Tracker{clk: clock.RealClock{}, observe: observe, seen: map[types.NamespacedName]time.Time{}, claims: map[string]*claim{}}
}

// Seen records that pod is pending now, unless it was seen already.
func (t *Tracker) Seen(pod types.NamespacedName) {
	if t == nil {
		return
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[pod]; !ok {
		t.seen[pod] = now
	}
}

// KeepOnly forgets the pods not in pending (bound, deleted, or planned
// onto a NodeClaim already launched). A pod seen again later counts from
// then.
func (t *Tracker) KeepOnly(pending map[types.NamespacedName]bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.seen {
		if !pending[k] {
			delete(t.seen, k)
		}
	}
}

// Planned records that pods were planned onto the new NodeClaim nodeClaim
// (its name); their first-seen times move to it until its launch.
func (t *Tracker) Planned(nodeClaim string, pods []types.NamespacedName) {
	if t == nil {
		return
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &claim{planned: now}
	for _, p := range pods {
		if at, ok := t.seen[p]; ok {
			c.seen = append(c.seen, at)
			delete(t.seen, p)
		}
	}
	if len(c.seen) > 0 {
		t.claims[nodeClaim] = c
	}
	for name, c := range t.claims {
		if now.Sub(c.planned) > staleAfter {
			delete(t.claims, name)
		}
	}
}

// issued observes the pods of nodeClaim, once.
func (t *Tracker) issued(nodeClaim string) {
	now := t.clk.Now()
	t.mu.Lock()
	c := t.claims[nodeClaim]
	delete(t.claims, nodeClaim)
	t.mu.Unlock()
	if c == nil {
		return
	}
	for _, at := range c.seen {
		t.observe(now.Sub(at).Seconds())
	}
}

// launch is one NodeClaim launch a context carries.
type launch struct {
	t    *Tracker
	name string
}

type launchesKey struct{}

// ForLaunch returns ctx carrying the launch of nodeClaim (its name), for
// Issued to observe. With a nil Tracker it returns ctx.
func (t *Tracker) ForLaunch(ctx context.Context, nodeClaim string) context.Context {
	if t == nil {
		return ctx
	}
	prev, _ := ctx.Value(launchesKey{}).([]launch)
	return context.WithValue(ctx, launchesKey{}, append(prev[:len(prev):len(prev)], launch{t, nodeClaim}))
}

// Merge returns dst carrying the launches of every context in from (and
// none of dst's own): a call merged from several callers issues all their
// launches.
func Merge(dst context.Context, from ...context.Context) context.Context {
	var all []launch
	for _, c := range from {
		l, _ := c.Value(launchesKey{}).([]launch)
		all = append(all, l...)
	}
	if len(all) == 0 && dst.Value(launchesKey{}) == nil {
		return dst
	}
	return context.WithValue(dst, launchesKey{}, all)
}

// Issued observes, once per NodeClaim, the pods of the launches ctx
// carries: the CreateFleet call for them is being issued now.
func Issued(ctx context.Context) {
	l, _ := ctx.Value(launchesKey{}).([]launch)
	for _, x := range l {
		x.t.issued(x.name)
	}
}
