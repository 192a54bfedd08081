package cache

import (
	"runtime"
	"testing"
	"time"
)

// TestNoCachingIsABypass: stores built from NoCaching hold nothing and
// start no goroutine (an expirable.LRU starts one sweeper per cache).
func TestNoCachingIsABypass(t *testing.T) {
	before := runtime.NumGoroutine()
	var stores []Store[string, int]
	for range 100 {
		stores = append(stores, New[string, int](16, NoCaching().Default))
	}
	for _, s := range stores {
		s.Add("k", 1)
		if v, ok := s.Get("k"); ok || s.Contains("k") || s.Len() != 0 {
			t.Fatalf("bypass returned %v, %v; len %d", v, ok, s.Len())
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("100 bypass stores started %d goroutines", after-before)
	}
	cached := New[string, int](16, time.Minute)
	cached.Add("k", 1)
	if v, ok := cached.Get("k"); !ok || v != 1 {
		t.Errorf("a store with a TTL did not keep its entry: %v, %v", v, ok)
	}
	for _, ttl := range []time.Duration{NoCaching().InstanceTypes, NoCaching().SpotPrice, NoCaching().SSM} {
		if ttl != 0 {
			t.Errorf("NoCaching has a TTL of %v, want 0 (bypass)", ttl)
		}
	}
}
