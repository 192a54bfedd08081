package budget

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog/awsquota"
)

// bucket is the client-side token bucket of one action (and, for
// DescribeInstances and DescribeSecurityGroups, of their unfiltered calls).
// rate.Limiter keeps the tokens; bucket hands them out by priority: a call
// that cannot be served at once queues, and dispatch serves the queues,
// Critical first, as tokens come back. Within a priority the queue is
// ordered by turn (see queueTurn): arrival order, except that a call
// launching or terminating several instances is served as if it had
// arrived earlier.
type bucket struct {
	action     string
	category   awsquota.Category
	unfiltered bool
	spec       awsquota.Bucket // effective size and refill, after Options.Fraction
	// lim holds the tokens; guarded by mu (onAnswered replaces it).
	lim *rate.Limiter
	// reserve is the number of tokens a Speculative call must leave.
	reserve float64
	// specWait is the longest a Speculative call queues.
	specWait time.Duration
	// Adaptation to throttled answers (adaptive.go); the adapt* fields
	// are Options' and do not change.
	adaptOff                 bool
	adaptDecrease, adaptMin  float64
	adaptHold, adaptRecovery time.Duration
	adapt                    adaptState
	// clock is Options.Clock.
	clock clock.WithDelayedExecution

	mu      sync.Mutex
	queues  [cloudprovider.NumPriorities][]*waiter
	timer   clock.Timer
	timerAt time.Time
}

type waiter struct {
	prio cloudprovider.Priority
	// turn orders the waiters of one priority, earliest first.
	turn  time.Time
	ready chan struct{} // closed once the waiter holds a token
}

// InstanceHeadStart is how much earlier than its arrival a queued call
// counts for each instance it launches or terminates beyond the first
// (callInstances), up to MaxHeadStart: a merged CreateFleet of 16 one-pod
// NodeClaims, queued behind single-NodeClaim calls that have waited less
// than 15 s, takes the next token. Every call costs one token, so serving
// the calls that act on the most instances first lowers the instances'
// mean wait (Smith's rule for jobs of equal length); the head start grows
// with the instance count, so a one-instance call is overtaken only by
// calls that arrived less than MaxHeadStart after it, and its wait stays
// bounded. One second per instance: a burst's later provisioning passes
// come seconds after the first, whose single-NodeClaim launches still
// queue then at the default fraction (CreateFleet's share refills 2.5
// tokens a second); a merged launch of a dozen one-pod NodeClaims should
// overtake them, a merged launch of two or three should not overtake
// calls that have waited seconds longer. docs/performance.md ("Launch
// order in the EC2 budget") has the 500-pod runs before and after.
const InstanceHeadStart = time.Second

// MaxHeadStart caps the head start of InstanceHeadStart: a merged call of
// up to the batcher's 1,000 instances overtakes only the calls queued less
// than 30 s before it.
const MaxHeadStart = 30 * time.Second

// queueTurn returns the turn of a call of n instances arriving at now:
// now, less InstanceHeadStart for each instance beyond the first, up to
// MaxHeadStart.
func queueTurn(now time.Time, n int) time.Time {
	if n <= 1 {
		return now
	}
	return now.Add(-min(time.Duration(n-1)*InstanceHeadStart, MaxHeadStart))
}

// newBucket returns the bucket of aws scaled by fraction: the burst is
// rounded down to whole tokens, at least one.
func newBucket(action string, cat awsquota.Category, unfiltered bool, aws awsquota.Bucket, fraction float64, opts *Options) *bucket {
	spec := awsquota.Bucket{Size: max(1, math.Floor(aws.Size*fraction)), RefillPerSecond: aws.RefillPerSecond * fraction}
	return &bucket{
		action: action, category: cat, unfiltered: unfiltered, spec: spec,
		lim:      rate.NewLimiter(rate.Limit(spec.RefillPerSecond), int(spec.Size)),
		reserve:  math.Floor(spec.Size * opts.SpeculativeReserve),
		specWait: opts.SpeculativeMaxWait,
		adaptOff: opts.passThrough || opts.AdaptiveDisabled, adaptDecrease: opts.AdaptiveDecrease,
		adaptMin: opts.AdaptiveMinFactor, adaptHold: opts.AdaptiveHold, adaptRecovery: opts.AdaptiveRecovery,
		adapt: adaptState{factor: 1, low: 1},
		clock: opts.Clock,
	}
}

// tokens returns the tokens in the bucket now.
func (b *bucket) tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.recoverLocked(now)
	return b.lim.TokensAt(now)
}

// need is the number of tokens the bucket must hold to serve p.
func (b *bucket) need(p cloudprovider.Priority) float64 {
	if p == cloudprovider.PrioritySpeculative {
		return 1 + b.reserve
	}
	return 1
}

// acquire takes one token for a call of priority p that launches or
// terminates n instances (1 for any other call; see queueTurn). It returns
// how long the call waited, and ctx's error when ctx ends first or
// *ExhaustedError when a Speculative call cannot be served in time.
func (b *bucket) acquire(ctx context.Context, p cloudprovider.Priority, n int) (time.Duration, error) {
	start := b.clock.Now()
	b.mu.Lock()
	b.recoverLocked(start)
	if b.queuedAtOrAbove(p) == 0 && b.lim.TokensAt(start) >= b.need(p) {
		b.lim.AllowN(start, 1)
		b.mu.Unlock()
		return 0, nil
	}
	if p == cloudprovider.PrioritySpeculative && b.specWait <= 0 {
		tokens := b.lim.TokensAt(start)
		b.mu.Unlock()
		return 0, b.exhausted(p, tokens, 0)
	}
	if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return 0, err
	}
	w := &waiter{prio: p, turn: queueTurn(start, n), ready: make(chan struct{})}
	q := b.queues[p.Rank()]
	// After every waiter whose turn is not later: equal turns stay FIFO.
	i := len(q)
	for i > 0 && q[i-1].turn.After(w.turn) {
		i--
	}
	b.queues[p.Rank()] = slices.Insert(q, i, w)
	b.scheduleLocked(start)
	b.mu.Unlock()

	var timeout <-chan time.Time
	if p == cloudprovider.PrioritySpeculative {
		t := b.clock.NewTimer(b.specWait)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-w.ready:
		return b.clock.Since(start), nil
	case <-ctx.Done():
		if b.dequeue(w) {
			return b.clock.Since(start), ctx.Err()
		}
		return b.clock.Since(start), nil // served meanwhile: use the token
	case <-timeout:
		if b.dequeue(w) {
			return b.clock.Since(start), b.exhausted(p, b.tokens(), b.clock.Since(start))
		}
		return b.clock.Since(start), nil
	}
}

func (b *bucket) exhausted(p cloudprovider.Priority, tokens float64, waited time.Duration) *ExhaustedError {
	return &ExhaustedError{Action: b.action, Category: b.category, Priority: p, Tokens: tokens, Reserve: b.reserve, Waited: waited}
}

// queuedAtOrAbove returns the number of calls waiting with priority p or
// a priority served before p.
func (b *bucket) queuedAtOrAbove(p cloudprovider.Priority) int {
	n := 0
	for r := 0; r <= p.Rank(); r++ {
		n += len(b.queues[r])
	}
	return n
}

// dequeue removes w from its queue and reports whether it was still
// waiting (false: dispatch served it).
func (b *bucket) dequeue(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[w.prio.Rank()]
	i := slices.Index(q, w)
	if i < 0 {
		return false
	}
	b.queues[w.prio.Rank()] = slices.Delete(q, i, i+1)
	b.scheduleLocked(b.clock.Now())
	return true
}

// dispatch serves the waiting calls the bucket has tokens for, by
// priority, and schedules itself for the next token.
func (b *bucket) dispatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.timer, b.timerAt = nil, time.Time{}
	b.recoverLocked(now)
	for {
		w := b.headLocked()
		if w == nil || b.lim.TokensAt(now) < b.need(w.prio) {
			break
		}
		b.lim.AllowN(now, 1)
		r := w.prio.Rank()
		b.queues[r] = b.queues[r][1:]
		close(w.ready)
	}
	b.scheduleLocked(now)
}

// headLocked returns the waiting call to serve next, or nil.
func (b *bucket) headLocked() *waiter {
	for _, q := range b.queues {
		if len(q) > 0 {
			return q[0]
		}
	}
	return nil
}

// scheduleLocked arms the dispatch timer for the moment the bucket holds
// enough tokens for the next waiting call.
func (b *bucket) scheduleLocked(now time.Time) {
	w := b.headLocked()
	if w == nil {
		if b.timer != nil {
			b.timer.Stop()
			b.timer, b.timerAt = nil, time.Time{}
		}
		return
	}
	if b.lim.Limit() <= 0 {
		return // never refills: waiters wait for their contexts
	}
	var delay time.Duration
	if missing := b.need(w.prio) - b.lim.TokensAt(now); missing > 0 {
		// Round up to the next millisecond so the timer does not fire a
		// hair before the token is there.
		delay = time.Duration(math.Ceil(missing/float64(b.lim.Limit())*1e3)) * time.Millisecond
	}
	at := now.Add(delay)
	if b.timer != nil {
		if !b.timerAt.After(at) {
			return // fires early enough
		}
		b.timer.Stop()
	}
	// dispatch runs in a goroutine of its own: a fake clock
	// (k8s.io/utils/clock/testing) calls AfterFunc's function while it holds
	// its lock, which dispatch's reading of the time would wait for forever.
	b.timer, b.timerAt = b.clock.AfterFunc(delay, func() { go b.dispatch() }), at
}
