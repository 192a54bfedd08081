package budget

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// The Limiter works as two smithy-go middlewares on an SDK client's
// stack, installed by AddToStack:
//
//   - admission, in the Initialize step (once per operation call, after
//     input validation): finds the bucket from the operation name
//     (middleware.GetOperationName) and input, takes the call's first
//     token, and records the call's outcome;
//   - attempts, in the Finalize step right after the SDK's "Retry"
//     middleware (once per attempt): takes a token for every retry and
//     counts retries and throttled answers, slowing the bucket down
//     (adaptive.go).
//
// The call in flight travels from the first to the second as a stack value.

// Middleware IDs on the stack.
const (
	admissionID = "karpx.budget.Admission"
	attemptsID  = "karpx.budget.Attempts"
)

// AddToStack installs l on stack: pass it in ec2api.Config.APIOptions (or
// an SDK client's Options.APIOptions). It fails only when stack already
// holds l's middlewares.
func (l *Limiter) AddToStack(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(admission{l}, middleware.After); err != nil {
		return fmt.Errorf("adding the AWS request budget to %s: %w", stack.ID(), err)
	}
	if err := stack.Finalize.Insert(attempts{}, "Retry", middleware.After); err != nil {
		return stack.Finalize.Add(attempts{}, middleware.After)
	}
	return nil
}

// call is one operation call in flight: its bucket, priority and attempts.
type call struct {
	l    *Limiter
	b    *bucket
	st   *counters
	prio cloudprovider.Priority
	// instances is the number of instances the call launches or
	// terminates (callInstances), which orders it in its bucket's queue.
	instances int
	attempts  atomic.Int32
}

type callKey struct{}

// admission is the Initialize middleware: one token per call.
type admission struct{ l *Limiter }

// ID implements middleware.InitializeMiddleware.
func (admission) ID() string { return admissionID }

// HandleInitialize takes the first token of a call of a budgeted
// operation, or returns *ExhaustedError for a Speculative call the budget
// cannot serve, or ctx's error; it records the call's outcome.
func (m admission) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	k := bucketKey{action: middleware.GetOperationName(ctx), unfiltered: isBare(in.Parameters)}
	b, ok := m.l.buckets[k]
	if !ok {
		return next.HandleInitialize(ctx, in) // not an operation of ec2api.API
	}
	c := &call{l: m.l, b: b, st: m.l.stats[k], prio: cloudprovider.PriorityFrom(ctx), instances: callInstances(in.Parameters)}
	if err := c.take(ctx); err != nil {
		return middleware.InitializeOutput{}, middleware.Metadata{}, err
	}
	m.l.metrics.requests.WithLabelValues(k.action).Inc()
	c.st.add(func(s *counters) { s.requests++ })
	out, md, err := next.HandleInitialize(middleware.WithStackValue(ctx, callKey{}, c), in)
	return out, md, c.end(err)
}

// attempts is the Finalize middleware: it runs once per SDK attempt,
// inside the retry loop.
type attempts struct{}

// ID implements middleware.FinalizeMiddleware.
func (attempts) ID() string { return attemptsID }

// HandleFinalize takes a token for every retry (the first attempt's token
// was taken by admission), counts retries and throttled answers.
func (attempts) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	c, _ := middleware.GetStackValue(ctx, callKey{}).(*call)
	if c == nil {
		return next.HandleFinalize(ctx, in)
	}
	if c.attempts.Add(1) > 1 {
		c.l.metrics.retries.WithLabelValues(c.b.action).Inc()
		c.st.add(func(s *counters) { s.retries++ })
		if err := c.take(ctx); err != nil {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, err
		}
	}
	out, md, err := next.HandleFinalize(ctx, in)
	switch code := ec2api.Code(err); {
	case isThrottle(code):
		c.throttled(code)
	case err == nil || code != "":
		// AWS answered without throttling: its bucket had room.
		c.b.onAnswered(c.b.clock.Now())
	}
	return out, md, err
}

// throttled records a throttled answer and slows c's bucket down.
func (c *call) throttled(code string) {
	c.l.metrics.throttled.WithLabelValues(c.b.action).Inc()
	c.st.add(func(s *counters) { s.throttled++ })
	c.l.log.V(1).Info("Throttled by AWS", "action", c.b.action, "code", code, "attempt", c.attempts.Load())
	if now := c.b.clock.Now(); c.b.onThrottled(now) {
		factor, size, refill, _, _ := c.b.adaptation(now)
		c.l.log.Info("Slowed down the client-side budget after a throttled answer", "action", c.b.action,
			"code", code, "factor", factor, "size", size, "refillPerSecond", refill)
	}
}

// take waits for a token of c's bucket (none in a pass-through Limiter of
// this package's tests) and records the wait.
func (c *call) take(ctx context.Context) error {
	if c.l.opts.passThrough {
		return nil
	}
	wait, err := c.b.acquire(ctx, c.prio, c.instances)
	c.l.metrics.wait.WithLabelValues(c.b.action, c.prio.String()).Observe(wait.Seconds())
	c.st.observeWait(wait.Seconds())
	var exhausted *ExhaustedError
	if errors.As(err, &exhausted) {
		c.l.metrics.exhausted.WithLabelValues(c.b.action, c.prio.String()).Inc()
		c.st.add(func(s *counters) { s.exhausted++ })
		c.l.log.V(1).Info("Refused a speculative call: client-side budget exhausted", "action", c.b.action,
			"category", c.b.category, "tokens", exhausted.Tokens, "reserve", exhausted.Reserve)
	}
	return err
}

// end records the outcome of the call and returns err.
func (c *call) end(err error) error {
	if err == nil {
		return nil
	}
	code := ec2api.Code(err)
	quota := isQuotaExceeded(err)
	switch {
	case code != "":
	case quota:
		code = "RetryQuotaExceeded"
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		code = "Canceled"
	default:
		code = "ClientError"
	}
	c.l.metrics.errors.WithLabelValues(c.b.action, code).Inc()
	c.st.add(func(s *counters) {
		s.errors++
		if quota {
			s.quotaErrors++
		}
	})
	if quota {
		c.l.metrics.quota.WithLabelValues(c.b.action).Inc()
		c.l.log.Info("AWS SDK retry quota exhausted", "action", c.b.action, "error", err.Error())
	}
	return err
}

// isQuotaExceeded reports whether err is the standard retryer's "failed to
// get rate limit token, retry quota exceeded" error.
func isQuotaExceeded(err error) bool {
	var q ratelimit.QuotaExceededError
	if errors.As(err, &q) {
		return true
	}
	var qp *ratelimit.QuotaExceededError
	return errors.As(err, &qp)
}

// isThrottle reports whether code is one the SDK treats as throttling.
func isThrottle(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}
