package cloudprovider

import (
	"context"
	"fmt"
)

// Priority says how urgently the cloud calls made with a context are
// needed, so that a cloud implementation that rations its API calls (the
// AWS one: the client-side budget of autoscaler/aws/budget) serves them in
// that order. Mark a context with WithPriority; unmarked calls are
// PriorityNormal.
type Priority int

const (
	// PriorityNormal is the priority of calls whose context is not marked.
	PriorityNormal Priority = iota
	// PriorityCritical marks calls that keep the cluster correct:
	// terminating an instance, reading instances during registration and
	// termination, launching a NodeClaim. They are served first.
	PriorityCritical
	// PrioritySpeculative marks work that can be retried later at no cost
	// (catalogue and spot price refreshes): it is served last and may be
	// refused instead of waiting.
	PrioritySpeculative
)

// String returns "normal", "critical" or "speculative".
func (p Priority) String() string {
	switch p {
	case PriorityNormal:
		return "normal"
	case PriorityCritical:
		return "critical"
	case PrioritySpeculative:
		return "speculative"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// MarshalText encodes p as String does, for JSON.
func (p Priority) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// NumPriorities is how many priorities there are: Rank is below it.
const NumPriorities = 3

// Rank is p's place in the order calls are served: 0 (PriorityCritical),
// 1 (PriorityNormal, and any unknown value), 2 (PrioritySpeculative).
func (p Priority) Rank() int {
	switch p {
	case PriorityCritical:
		return 0
	case PrioritySpeculative:
		return 2
	}
	return 1
}

// Outranks reports whether calls of priority p are served before those of
// q: PriorityCritical outranks PriorityNormal, which outranks
// PrioritySpeculative.
func (p Priority) Outranks(q Priority) bool { return p.Rank() < q.Rank() }

type priorityKey struct{}

// WithPriority returns a copy of ctx whose cloud calls have priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority WithPriority stored in ctx, or
// PriorityNormal.
func PriorityFrom(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	return PriorityNormal
}
