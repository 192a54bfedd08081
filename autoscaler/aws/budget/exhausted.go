package budget

import (
	"errors"
	"fmt"
	"time"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog/awsquota"
)

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
	Priority cloudprovider.Priority
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
