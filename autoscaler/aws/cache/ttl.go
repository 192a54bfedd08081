package cache

import "time"

// Lifetimes of cached AWS state. Unless noted, values follow the defaults of
// Karpenter's AWS provider, aws/karpenter-provider-aws pkg/cache/cache.go,
// which were tuned against EC2 API rate limits in production clusters.
const (
	// DefaultTTL bounds how stale the resolution of an EC2NodeClass's
	// selector terms may be: subnets, security groups and AMIs found by
	// DescribeSubnets/DescribeSecurityGroups/DescribeImages, and the
	// existence of a launch template. One minute is the longest a new or
	// re-tagged resource waits to be used, and at most one Describe call per
	// class and resource kind per minute. Source: Karpenter DefaultTTL (1m).
	DefaultTTL = time.Minute

	// InstanceTypesTTL bounds how stale the instance-type list and the zones
	// each type is offered in (DescribeInstanceTypes and
	// DescribeInstanceTypeOfferings, both paginated over hundreds of types)
	// may be. The answers change only when AWS launches a type or zone.
	// Source: Karpenter InstanceTypesZonesAndOfferingsTTL (5m).
	InstanceTypesTTL = 5 * time.Minute

	// UnavailableOfferingsTTL is how long an (instance type, zone, capacity
	// type) stays unavailable after EC2 answered InsufficientInstanceCapacity
	// (or another unfulfillable-capacity code). Long enough that the next
	// provisioning rounds pick another offering instead of hitting the same
	// empty pool, short enough that recovered capacity is used again soon.
	// Source: Karpenter UnavailableOfferingsTTL (3m).
	UnavailableOfferingsTTL = 3 * time.Minute

	// SpotPriceTTL bounds how stale spot prices from DescribeSpotPriceHistory
	// may be. Prices move slowly and only rank offerings; the spot fleet
	// strategy (price-capacity-optimized) chooses with live data at launch.
	// Source: Karpenter's pricing controller, which refreshes spot prices
	// every 12 hours.
	SpotPriceTTL = 12 * time.Hour

	// SSMTTL bounds how stale an SSM public-parameter lookup (the AMI ID of
	// an alias such as al2023@latest) may be. The parameters change once per
	// AMI release, at most weekly; a pinned alias never changes. A new
	// release is therefore picked up within a day, and drift replaces nodes
	// from there. Source: Karpenter SSMCacheTTL (24h).
	SSMTTL = 24 * time.Hour
)

// Sizes bound memory: each cache holds at most this many entries and evicts
// the least recently used beyond that. karpx keys by EC2NodeClass (or by
// parameter, template, offering), so these are far above what a cluster uses.
const (
	// NodeClassEntries is the size of per-EC2NodeClass caches (subnets,
	// security groups, AMIs, instance types).
	NodeClassEntries = 256
	// LaunchTemplateEntries is the size of the launch-template existence
	// cache: one entry per distinct template content.
	LaunchTemplateEntries = 1024
	// OfferingEntries is the size of the unavailable-offerings and
	// spot-price caches: one entry per (instance type, zone[, capacity type]).
	OfferingEntries = 16384
	// SSMEntries is the size of the SSM parameter cache.
	SSMEntries = 256
)

// TTLs are the lifetimes the providers use; DefaultTTLs returns the
// constants above; unit tests pass NoCaching to see every call reach EC2.
type TTLs struct {
	// Default is DefaultTTL: subnets, security groups, AMIs, launch templates.
	Default time.Duration
	// InstanceTypes is InstanceTypesTTL.
	InstanceTypes time.Duration
	// SpotPrice is SpotPriceTTL.
	SpotPrice time.Duration
	// SSM is SSMTTL.
	SSM time.Duration
}

// DefaultTTLs returns the documented defaults.
func DefaultTTLs() TTLs {
	return TTLs{Default: DefaultTTL, InstanceTypes: InstanceTypesTTL, SpotPrice: SpotPriceTTL, SSM: SSMTTL}
}

// NoCaching returns TTLs of zero: every Store built from them with New is a
// bypass, so every lookup goes to EC2 (tests of a provider's calls).
func NoCaching() TTLs { return TTLs{} }
