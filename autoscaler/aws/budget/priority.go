package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/karpx/karpx/catalog/awsquota"
)

// Priority says how a call may be delayed when its bucket is empty. Mark
// a context with WithPriority; unmarked calls are Normal.
type Priority int

const (
	// Normal calls wait, in arrival order, for a token, as long as their
	// context allows, behind every waiting Critical call. It is the
	// priority of calls whose context is not marked.
	Normal Priority = iota
	// Critical calls wait for a token as long as their context allows and
	// are served before every waiting Normal and Speculative call. Use it
	// for calls that keep the cluster correct: TerminateInstances,
	// DescribeInstances of registration and termination, CreateFleet of a
	// NodeClaim being launched.
	Critical
	// Speculative calls never queue behind the others: they take a token
	// only while the bucket keeps Options.SpeculativeReserve of its size
	// for the other priorities, wait at most Options.SpeculativeMaxWait,
	// and otherwise fail with *ExhaustedError. Use it for work that can be
	// retried later at no cost: catalogue and spot price refreshes.
	Speculative
)

// priorities lists the priorities in the order waiting calls are served.
var priorities = [...]Priority{Critical, Normal, Speculative}

// String returns "normal", "critical" or "speculative".
func (p Priority) String() string {
	switch p {
	case Normal:
		return "normal"
	case Critical:
		return "critical"
	case Speculative:
		return "speculative"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// MarshalText encodes p as String does, for JSON.
func (p Priority) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// rank is p's queue index: 0 is served first.
func (p Priority) rank() int {
	switch p {
	case Critical:
		return 0
	case Speculative:
		return 2
	}
	return 1
}

type priorityKey struct{}

// WithPriority returns a copy of ctx whose EC2 and SSM calls through a
// client with a Limiter on its stack have priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority WithPriority stored in ctx, or Normal.
func PriorityFrom(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	return Normal
}

// ExhaustedError is returned, before anything is sent to AWS, for a
// Speculative call that would have had to wait longer than
// Options.SpeculativeMaxWait for a token, or dig into the share of the
// bucket reserved for Critical and Normal calls. Retry the work later.
type ExhaustedError struct {
	// Action is the EC2 or SSM action, e.g. "DescribeSpotPriceHistory".
	Action string
	// Category is the throttling category of the bucket.
	Category awsquota.Category
	// Priority is the priority of the refused call (Speculative).
	Priority Priority
	// Tokens is the number of tokens in the bucket when the call was
	// refused.
	Tokens float64
	// Reserve is the number of tokens the call had to leave in the bucket.
	Reserve float64
	// Waited is how long the call waited before it was refused.
	Waited time.Duration
}

// Error describes the refusal, for example
//
//	client-side EC2 API budget exhausted: speculative DescribeSpotPriceHistory call refused after 100ms (non-mutating bucket: 3.2 tokens, 12.0 reserved for critical and normal calls)
func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("client-side EC2 API budget exhausted: %s %s call refused after %s (%s bucket: %.1f tokens, %.1f reserved for critical and normal calls)",
		e.Priority, e.Action, e.Waited.Round(time.Millisecond), e.Category, e.Tokens, e.Reserve)
}

// IsExhausted reports whether err, or an error it wraps, is an
// *ExhaustedError.
func IsExhausted(err error) bool {
	var e *ExhaustedError
	return errors.As(err, &e)
}

// Outranks reports whether the budget serves waiting calls of priority p
// before those of q: Critical outranks Normal, which outranks Speculative.
func (p Priority) Outranks(q Priority) bool { return p.rank() < q.rank() }
