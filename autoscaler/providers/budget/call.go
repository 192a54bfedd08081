package budget

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"

	"github.com/karpx/karpx/autoscaler/providers/ec2api"
)

// call is one API call in flight: its bucket, priority and attempts.
type call struct {
	a        *API
	b        *bucket
	st       *counters
	prio     Priority
	attempts atomic.Int32
}

// begin takes the first token of a call. It returns *ExhaustedError for a
// Speculative call the budget cannot serve, or ctx's error.
func (a *API) begin(ctx context.Context, action string, unfiltered bool) (*call, error) {
	k := bucketKey{action, unfiltered}
	c := &call{a: a, b: a.buckets[k], st: a.stats[k], prio: PriorityFrom(ctx)}
	if err := c.take(ctx); err != nil {
		return nil, err
	}
	a.metrics.requests.WithLabelValues(action).Inc()
	c.st.add(func(s *counters) { s.requests++ })
	return c, nil
}

// take waits for a token of c's bucket, unless the budget is disabled,
// and records the wait.
func (c *call) take(ctx context.Context) error {
	if c.a.opts.Disabled {
		return nil
	}
	wait, err := c.b.acquire(ctx, c.prio)
	c.a.metrics.wait.WithLabelValues(c.b.action, c.prio.String()).Observe(wait.Seconds())
	c.st.observeWait(wait.Seconds())
	var exhausted *ExhaustedError
	if errors.As(err, &exhausted) {
		c.a.metrics.exhausted.WithLabelValues(c.b.action, c.prio.String()).Inc()
		c.st.add(func(s *counters) { s.exhausted++ })
		c.a.log.V(1).Info("Refused a speculative call: client-side budget exhausted", "action", c.b.action,
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
	c.a.metrics.errors.WithLabelValues(c.b.action, code).Inc()
	c.st.add(func(s *counters) {
		s.errors++
		if quota {
			s.quotaErrors++
		}
	})
	if quota {
		c.a.metrics.quota.WithLabelValues(c.b.action).Inc()
		c.a.log.Info("AWS SDK retry quota exhausted", "action", c.b.action, "error", err.Error())
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

// attemptsID names the per-attempt middleware.
const attemptsID = "karpx.budget.Attempts"

// ID implements middleware.FinalizeMiddleware.
func (c *call) ID() string { return attemptsID }

// HandleFinalize runs once per SDK attempt, inside the retry loop: it
// takes a token for every retry (the first attempt's token was taken by
// begin), counts retries and throttled answers.
func (c *call) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if c.attempts.Add(1) > 1 {
		c.a.metrics.retries.WithLabelValues(c.b.action).Inc()
		c.st.add(func(s *counters) { s.retries++ })
		if err := c.take(ctx); err != nil {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, err
		}
	}
	out, md, err := next.HandleFinalize(ctx, in)
	if code := ec2api.Code(err); isThrottle(code) {
		c.a.metrics.throttled.WithLabelValues(c.b.action).Inc()
		c.st.add(func(s *counters) { s.throttled++ })
		c.a.log.V(1).Info("Throttled by AWS", "action", c.b.action, "code", code, "attempt", c.attempts.Load())
		if now := c.b.clock.Now(); c.b.onThrottled(now) {
			factor, size, refill, _, _ := c.b.adaptation(now)
			c.a.log.Info("Slowed down the client-side budget after a throttled answer", "action", c.b.action,
				"code", code, "factor", factor, "size", size, "refillPerSecond", refill)
		}
	}
	return out, md, err
}

// addToStack inserts c right after the SDK's retry middleware, so it runs
// for every attempt.
func (c *call) addToStack(stack *middleware.Stack) error {
	if err := stack.Finalize.Insert(c, "Retry", middleware.After); err != nil {
		return stack.Finalize.Add(c, middleware.After)
	}
	return nil
}

// ec2Opts returns optFns plus the option that installs c's middleware.
func (c *call) ec2Opts(optFns []func(*ec2.Options)) []func(*ec2.Options) {
	return append(slices.Clip(optFns), func(o *ec2.Options) { o.APIOptions = append(o.APIOptions, c.addToStack) })
}

// ssmOpts is ec2Opts for SSM.
func (c *call) ssmOpts(optFns []func(*ssm.Options)) []func(*ssm.Options) {
	return append(slices.Clip(optFns), func(o *ssm.Options) { o.APIOptions = append(o.APIOptions, c.addToStack) })
}
