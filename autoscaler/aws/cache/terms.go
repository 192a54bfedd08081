package cache

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"
)

// TermResolver resolves EC2NodeClass selector terms (subnets, security
// groups): the union, by ID, of what each term selects, sorted, cached per
// set of terms. Concurrent resolutions are serialised, so a burst of
// launches makes one Describe call per term, not one per launch. It is
// safe for concurrent use.
type TermResolver[Term, T any] struct {
	mu    sync.Mutex
	cache Store[string, []T]
	id    func(T) string
	less  func(a, b T) bool
}

// NewTermResolver returns a resolver caching NodeClassEntries results for
// ttl (nothing when ttl is 0: see New). id keys the union; less orders the result.
func NewTermResolver[Term, T any](ttl time.Duration, id func(T) string, less func(a, b T) bool) *TermResolver[Term, T] {
	return &TermResolver[Term, T]{cache: New[string, []T](NodeClassEntries, ttl), id: id, less: less}
}

// Resolve returns the cached result for terms, or calls lookup for each
// term and caches the union. It returns lookup's first error, uncached.
func (r *TermResolver[Term, T]) Resolve(terms []Term, lookup func(Term) ([]T, error)) ([]T, error) {
	keyBytes, err := json.Marshal(terms)
	if err != nil {
		return nil, fmt.Errorf("encoding selector terms: %w", err)
	}
	key := string(keyBytes)
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.cache.Get(key); ok {
		return v, nil
	}
	byID := map[string]T{}
	for _, term := range terms {
		found, err := lookup(term)
		if err != nil {
			return nil, err
		}
		for _, v := range found {
			byID[r.id(v)] = v
		}
	}
	out := make([]T, 0, len(byID))
	for _, v := range byID {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return r.less(out[i], out[j]) })
	r.cache.Add(key, out)
	return out, nil
}
