// Package cache holds every cache lifetime and size used by karpx's AWS
// providers, in one file (ttl.go), each with the reason for its value and
// its source, so that the trade-off between EC2 API load and staleness can
// be reviewed in one place.
//
// The providers themselves use github.com/hashicorp/golang-lru/v2/expirable
// with these values; this package has no code.
package cache
