// Package instancetype builds the instance types, and their offerings, that
// an EC2NodeClass can launch.
//
// Sources, per field of cloudprovider.InstanceType:
//
//   - which types exist: DescribeInstanceTypes (paginated), cached for
//     cache.InstanceTypesTTL;
//   - which zones sell each type: DescribeInstanceTypeOfferings by
//     availability zone, intersected with the zones of the class's subnets,
//     cached for cache.InstanceTypesTTL;
//   - Labels, Capacity and Allocatable: the catalogue entry of the same name
//     (github.com/karpx/karpx/catalog, extracted from
//     aws/karpenter-provider-aws), falling back to values derived from the
//     DescribeInstanceTypes answer for types the catalogue lacks;
//   - on-demand price: the catalogue's us-east-1 Linux price (types without
//     a published price get no on-demand offering, as in Karpenter);
//   - spot price: DescribeSpotPriceHistory (Linux/UNIX, current), cached for
//     cache.SpotPriceTTL; where EC2 reports none, the on-demand price, the
//     ceiling of any spot price;
//   - Available: false while the (type, zone, capacity type) is in the
//     UnavailableOfferings cache after an InsufficientInstanceCapacity.
//
// Files: instancetype.go (the Provider, List and the catalogue refresh),
// info.go (Info: labels, capacity and allocatable of one type), spot.go
// (spot prices, refreshed page by page within the EC2 API budget),
// unavailable.go (the ICE cache).
package instancetype
