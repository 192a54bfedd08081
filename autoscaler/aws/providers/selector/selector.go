package selector

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpx/karpx/autoscaler/aws/cache"
)

// Pages is the shape of the SDK's EC2 Describe paginators (for example
// *ec2.DescribeSubnetsPaginator); O is the type of one page.
type Pages[O any] interface {
	HasMorePages() bool
	NextPage(ctx context.Context, optFns ...func(*ec2.Options)) (O, error)
}

// Describe is how a Resolver reads the resources T one term of type Term
// selects, a page of type O at a time.
type Describe[Term, O, T any] struct {
	// What names the resources in errors, for example "subnets".
	What string
	// Filters returns a term's Describe filters, ANDed by EC2. None means
	// the term selects nothing, and no call is made.
	Filters func(Term) []ec2types.Filter
	// Pages starts the Describe paginator for filters.
	Pages func(filters []ec2types.Filter) Pages[O]
	// Items returns the resources of one page.
	Items func(O) []T
}

// Resolver resolves selector terms into resources T: the union, by ID, of
// what each term selects, sorted and cached per set of terms (see
// cache.TermResolver). It is safe for concurrent use.
type Resolver[Term, O, T any] struct {
	terms    *cache.TermResolver[Term, T]
	describe Describe[Term, O, T]
}

// New returns a Resolver caching each resolution for ttl (nothing when ttl
// is 0). id keys the union; less orders the result.
func New[Term, O, T any](ttl time.Duration, id func(T) string, less func(a, b T) bool, d Describe[Term, O, T]) *Resolver[Term, O, T] {
	return &Resolver[Term, O, T]{terms: cache.NewTermResolver[Term](ttl, id, less), describe: d}
}

// List returns the resources matching any of terms. An empty result is not
// an error; the caller names the EC2NodeClass field. Errors are the first
// failed Describe page's, wrapped as "describing <What>: ...".
func (r *Resolver[Term, O, T]) List(ctx context.Context, terms []Term) ([]T, error) {
	return r.terms.Resolve(terms, func(term Term) ([]T, error) {
		filters := r.describe.Filters(term)
		if len(filters) == 0 {
			return nil, nil
		}
		var found []T
		pages := r.describe.Pages(filters)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing %s: %w", r.describe.What, err)
			}
			found = append(found, r.describe.Items(page)...)
		}
		return found, nil
	})
}
