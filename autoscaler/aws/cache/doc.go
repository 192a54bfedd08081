// Package cache holds every cache lifetime and size used by karpx's AWS
// providers, in one file (ttl.go), each with the reason for its value and
// its source, so that the trade-off between EC2 API load and staleness can
// be reviewed in one place.
//
// The providers build their caches with New (store.go): a
// github.com/hashicorp/golang-lru/v2/expirable LRU with these lifetimes, or
// a real bypass, holding nothing, for the zero TTLs of NoCaching (tests). TermResolver
// (terms.go) resolves selector terms through one.
package cache
