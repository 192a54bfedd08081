package batcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/state/launchlatency"
)

// BatcherOptions configure a Batcher of requests *T answered with *U.
type BatcherOptions[T, U any] struct {
	// Name labels the batcher's metrics, e.g. "CreateFleet".
	Name string
	// IdleTimeout closes a batch when no request joined it for this long.
	IdleTimeout time.Duration
	// MaxTimeout closes a batch this long after its first request, however
	// busy: it bounds the latency batching adds.
	MaxTimeout time.Duration
	// MaxItems closes a batch once the weights of its requests add up to
	// at least this many items (instance ids, instances to launch). A
	// request heavier than MaxItems runs alone.
	MaxItems int
	// Key returns the batch a request joins: requests with equal keys may
	// be merged. ok=false runs the request alone, unbatched.
	Key func(in *T) (key string, ok bool)
	// Weight returns the number of items a request adds to its batch. Nil
	// means one per request.
	Weight func(in *T) int
	// Execute runs a batch and returns one result per input, in order. It
	// runs with a context that carries the values of the batch's first
	// request and the highest cloudprovider.Priority of its requests.
	Execute func(ctx context.Context, inputs []*T) []Result[U]
	// Single runs a request that cannot be batched.
	Single func(ctx context.Context, in *T) (*U, error)
	// RunToCompletion keeps a batch running after every caller gave up
	// (their contexts ended). Set it for calls with side effects
	// (CreateFleet, TerminateInstances), whose outcome must not be lost
	// mid-flight; otherwise the batch's call is cancelled.
	RunToCompletion bool
	// Metrics, when not nil, records batch sizes and windows.
	Metrics *Metrics
	// Clock times batch windows. Nil means clock.RealClock; tests may pass
	// a k8s.io/utils/clock/testing fake.
	Clock clock.WithDelayedExecution
}

// Result is the answer to one request of a batch.
type Result[U any] struct {
	// Output is the request's share of the batch's answer.
	Output *U
	// Err is the request's error; Output is ignored when it is not nil.
	Err error
}

// errNoResult is returned to a request Execute returned no result for, a
// programming error of the executor.
var errNoResult = errors.New("batcher: the batch returned no result for this request")

// Batcher merges concurrent requests with equal keys into one call. It is
// safe for concurrent use; the zero value is not usable, use NewBatcher.
type Batcher[T, U any] struct {
	opts BatcherOptions[T, U]

	mu      sync.Mutex
	pending map[string]*batch[T, U]
}

// batch is an open or running set of requests with one key.
type batch[T, U any] struct {
	key      string
	reqs     []*request[T, U]
	weight   int
	started  time.Time
	deadline time.Time
	timer    clock.Timer
}

type request[T, U any] struct {
	ctx  context.Context
	in   *T
	done chan Result[U] // buffered: the batch never blocks on a caller
}

// NewBatcher returns a Batcher for opts.
func NewBatcher[T, U any](opts BatcherOptions[T, U]) *Batcher[T, U] {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Batcher[T, U]{opts: opts, pending: map[string]*batch[T, U]{}}
}

// Add submits in and waits for its result. It returns ctx's error if ctx
// ends first; the batch still runs for its other requests.
func (b *Batcher[T, U]) Add(ctx context.Context, in *T) (*U, error) {
	key, ok := b.opts.Key(in)
	w := b.weight(in)
	if !ok || w > b.opts.MaxItems {
		return b.opts.Single(ctx, in)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &request[T, U]{ctx: ctx, in: in, done: make(chan Result[U], 1)}

	b.mu.Lock()
	bt := b.pending[key]
	if bt != nil && bt.weight+w > b.opts.MaxItems {
		b.closeLocked(bt) // full: run it, start a new batch
		bt = nil
	}
	now := b.opts.Clock.Now()
	if bt == nil {
		bt = &batch[T, U]{key: key, started: now, deadline: now.Add(b.opts.MaxTimeout)}
		b.pending[key] = bt
		bt.timer = b.opts.Clock.AfterFunc(min(b.opts.IdleTimeout, b.opts.MaxTimeout), func() { b.close(bt) })
	} else {
		bt.timer.Reset(min(b.opts.IdleTimeout, bt.deadline.Sub(now)))
	}
	bt.reqs = append(bt.reqs, req)
	bt.weight += w
	if bt.weight >= b.opts.MaxItems {
		b.closeLocked(bt)
	}
	b.mu.Unlock()

	select {
	case r := <-req.done:
		return r.Output, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *Batcher[T, U]) weight(in *T) int {
	if b.opts.Weight == nil {
		return 1
	}
	return b.opts.Weight(in)
}

// close runs bt unless it already runs.
func (b *Batcher[T, U]) close(bt *batch[T, U]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLocked(bt)
}

func (b *Batcher[T, U]) closeLocked(bt *batch[T, U]) {
	if b.pending[bt.key] != bt {
		return // already running
	}
	delete(b.pending, bt.key)
	bt.timer.Stop()
	go b.run(bt)
}

// run executes a closed batch and hands out the results.
func (b *Batcher[T, U]) run(bt *batch[T, U]) {
	if m := b.opts.Metrics; m != nil {
		m.window.WithLabelValues(b.opts.Name).Observe(b.opts.Clock.Since(bt.started).Seconds())
	}
	// Requests whose caller already left are dropped.
	live := bt.reqs[:0]
	for _, r := range bt.reqs {
		if err := r.ctx.Err(); err != nil {
			r.done <- Result[U]{Err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if m := b.opts.Metrics; m != nil {
		m.size.WithLabelValues(b.opts.Name).Observe(float64(len(live)))
	}
	ctx, cancel := b.context(live)
	defer cancel()
	inputs := make([]*T, len(live))
	for i, r := range live {
		inputs[i] = r.in
	}
	results := b.opts.Execute(ctx, inputs)
	for i, r := range live {
		if i < len(results) {
			r.done <- results[i]
		} else {
			r.done <- Result[U]{Err: errNoResult}
		}
	}
}

// context returns the context a batch runs with: the values of the first
// request's context, the highest budget priority of the batch, and,
// unless RunToCompletion, cancelled once every caller has left.
func (b *Batcher[T, U]) context(reqs []*request[T, U]) (context.Context, context.CancelFunc) {
	prio := cloudprovider.PriorityFrom(reqs[0].ctx)
	for _, r := range reqs[1:] {
		prio = higher(prio, cloudprovider.PriorityFrom(r.ctx))
	}
	ctx := cloudprovider.WithPriority(context.WithoutCancel(reqs[0].ctx), prio)
	// A merged call issues every caller's NodeClaim launch (provisioning
	// latency, package launchlatency).
	ctxs := make([]context.Context, len(reqs))
	for i, r := range reqs {
		ctxs[i] = r.ctx
	}
	ctx, cancel := context.WithCancel(launchlatency.Merge(ctx, ctxs...))
	if b.opts.RunToCompletion {
		return ctx, cancel
	}
	var (
		mu   sync.Mutex
		left = len(reqs)
	)
	stops := make([]func() bool, 0, len(reqs))
	for _, r := range reqs {
		stops = append(stops, context.AfterFunc(r.ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// higher returns the priority the budget serves first.
func higher(a, b cloudprovider.Priority) cloudprovider.Priority {
	if b.Outranks(a) {
		return b
	}
	return a
}
