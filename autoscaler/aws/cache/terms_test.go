package cache

import (
	"errors"
	"testing"
	"time"
)

func TestTermResolverUnionsSortsAndCaches(t *testing.T) {
	calls := 0
	r := NewTermResolver[string](time.Minute, func(s string) string { return s }, func(a, b string) bool { return a < b })
	lookup := func(term string) ([]string, error) {
		calls++
		return map[string][]string{"a": {"sg-2", "sg-1"}, "b": {"sg-1", "sg-3"}}[term], nil
	}
	got, err := r.Resolve([]string{"a", "b"}, lookup)
	if err != nil || len(got) != 3 || got[0] != "sg-1" || got[2] != "sg-3" {
		t.Fatalf("Resolve = %v, %v; want the sorted union [sg-1 sg-2 sg-3]", got, err)
	}
	if _, err := r.Resolve([]string{"a", "b"}, lookup); err != nil || calls != 2 {
		t.Fatalf("second Resolve made %d lookups in all, want 2 (cached)", calls)
	}
	if _, err := r.Resolve([]string{"b"}, lookup); err != nil || calls != 3 {
		t.Fatalf("other terms must not hit the cache: %d lookups", calls)
	}
}

func TestTermResolverDoesNotCacheErrors(t *testing.T) {
	r := NewTermResolver[string](time.Minute, func(s string) string { return s }, func(a, b string) bool { return a < b })
	fail := true
	lookup := func(string) ([]string, error) {
		if fail {
			return nil, errors.New("RequestLimitExceeded")
		}
		return []string{"x"}, nil
	}
	if _, err := r.Resolve([]string{"t"}, lookup); err == nil {
		t.Fatal("error not returned")
	}
	fail = false
	if got, err := r.Resolve([]string{"t"}, lookup); err != nil || len(got) != 1 {
		t.Fatalf("after a failure: %v, %v; the error must not be cached", got, err)
	}
}
