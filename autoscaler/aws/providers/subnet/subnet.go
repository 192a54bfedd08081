package subnet

import (
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/selector"
)

// Subnet is a resolved subnet.
type Subnet struct {
	// ID is the subnet ID, for example "subnet-0123456789abcdef0".
	ID string
	// Zone is the availability zone name, for example "us-east-1a".
	Zone string
	// ZoneID is the account-independent zone ID, for example "use1-az1".
	ZoneID string
	// AvailableIPs is the number of free IPv4 addresses when last described.
	AvailableIPs int32
}

// Provider resolves subnet selector terms with DescribeSubnets; List
// answers the subnets matching any term, sorted by zone then ID (none is
// not an error: the caller names the EC2NodeClass field), or the wrapped
// AWS API error. Safe for concurrent use.
type Provider = selector.Resolver[v1.SubnetSelectorTerm, *ec2.DescribeSubnetsOutput, Subnet]

// NewProvider returns a Provider reading subnets through api, each set of
// terms cached for ttls.Default (cache.DefaultTTL unless the caches are
// off).
func NewProvider(api ec2api.API, ttls cache.TTLs) *Provider {
	describe := selector.Describe[v1.SubnetSelectorTerm, *ec2.DescribeSubnetsOutput, Subnet]{What: "subnets", Filters: Filters, Items: subnetsOf}
	describe.Pages = func(filters []ec2types.Filter) selector.Pages[*ec2.DescribeSubnetsOutput] {
		return ec2.NewDescribeSubnetsPaginator(api, &ec2.DescribeSubnetsInput{Filters: filters})
	}
	return selector.New(ttls.Default, func(s Subnet) string { return s.ID },
		func(a, b Subnet) bool { return a.Zone < b.Zone || (a.Zone == b.Zone && a.ID < b.ID) }, describe)
}

// subnetsOf returns the subnets of one DescribeSubnets page.
func subnetsOf(out *ec2.DescribeSubnetsOutput) []Subnet {
	subnets := make([]Subnet, 0, len(out.Subnets))
	for _, s := range out.Subnets {
		subnets = append(subnets, Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone),
			ZoneID: aws.ToString(s.AvailabilityZoneId), AvailableIPs: aws.ToInt32(s.AvailableIpAddressCount)})
	}
	return subnets
}

// Zones returns the distinct zones of subnets, sorted.
func Zones(subnets []Subnet) []string {
	seen := map[string]bool{}
	var zones []string
	for _, s := range subnets {
		if !seen[s.Zone] {
			seen[s.Zone] = true
			zones = append(zones, s.Zone)
		}
	}
	sort.Strings(zones)
	return zones
}

// Filters returns the DescribeSubnets filters of one selector term, sorted
// by name; empty for an empty term (which selects nothing).
func Filters(term v1.SubnetSelectorTerm) []ec2types.Filter {
	filters := ec2api.TagFilters(term.Tags)
	if term.ID != "" {
		filters = append([]ec2types.Filter{ec2api.Filter("subnet-id", term.ID)}, filters...)
	}
	return filters
}
