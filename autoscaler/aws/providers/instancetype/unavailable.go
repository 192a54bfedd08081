package instancetype

import (
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/karpx/karpx/autoscaler/aws/cache"
)

// UnavailableOfferings remembers offerings EC2 recently could not fulfil
// (InsufficientInstanceCapacity and the other unfulfillable-capacity codes)
// for cache.UnavailableOfferingsTTL. It is safe for concurrent use.
type UnavailableOfferings struct {
	cache *expirable.LRU[string, struct{}]
}

// NewUnavailableOfferings returns an empty cache.
func NewUnavailableOfferings() *UnavailableOfferings {
	return &UnavailableOfferings{cache: expirable.NewLRU[string, struct{}](cache.OfferingEntries, nil, cache.UnavailableOfferingsTTL)}
}

func offeringKey(instanceType, zone, capacityType string) string {
	return capacityType + "/" + zone + "/" + instanceType
}

// MarkUnavailable marks the offering unavailable for
// cache.UnavailableOfferingsTTL from now (a repeated mark restarts the TTL).
func (u *UnavailableOfferings) MarkUnavailable(instanceType, zone, capacityType string) {
	u.cache.Add(offeringKey(instanceType, zone, capacityType), struct{}{})
}

// IsUnavailable reports whether the offering is marked unavailable.
func (u *UnavailableOfferings) IsUnavailable(instanceType, zone, capacityType string) bool {
	return u.cache.Contains(offeringKey(instanceType, zone, capacityType))
}

// Len returns the number of offerings currently marked.
func (u *UnavailableOfferings) Len() int { return u.cache.Len() }
