package cache

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// Store is a bounded cache of AWS answers whose entries expire: the part of
// golang-lru's expirable.LRU the providers use. New returns one.
type Store[K comparable, V any] interface {
	// Get returns the value of key and true, or the zero value and false
	// when key is absent or expired.
	Get(key K) (value V, ok bool)
	// Contains reports whether key is present and not expired.
	Contains(key K) bool
	// Add stores value under key for the Store's lifetime and reports
	// whether an older entry was evicted to make room.
	Add(key K, value V) (evicted bool)
	// Remove deletes key and reports whether it was present.
	Remove(key K) bool
	// Len returns the number of entries, expired ones not yet swept
	// included.
	Len() int
	// Purge deletes every entry.
	Purge()
}

// New returns a Store of at most size entries that live for ttl: an
// expirable.LRU, or, when ttl is 0 or negative (NoCaching), a bypass that
// stores nothing, so that every lookup goes to AWS, with no goroutine and
// no timer. (expirable.NewLRU itself reads a ttl of 0 as "never expire" and
// sweeps expired entries every ttl/100 in a goroutine per cache, so a tiny
// ttl would not be a bypass.)
func New[K comparable, V any](size int, ttl time.Duration) Store[K, V] {
	if ttl <= 0 {
		return bypass[K, V]{}
	}
	return expirable.NewLRU[K, V](size, nil, ttl)
}

// bypass is a Store that holds nothing.
type bypass[K comparable, V any] struct{}

func (bypass[K, V]) Get(K) (v V, ok bool) { return v, false }
func (bypass[K, V]) Contains(K) bool      { return false }
func (bypass[K, V]) Add(K, V) bool        { return false }
func (bypass[K, V]) Remove(K) bool        { return false }
func (bypass[K, V]) Len() int             { return 0 }
func (bypass[K, V]) Purge()               {}
