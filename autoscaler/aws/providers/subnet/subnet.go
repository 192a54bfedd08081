package subnet

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
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

// Provider resolves subnet selector terms. It is safe for concurrent use.
type Provider struct {
	api      ec2api.API
	resolver *cache.TermResolver[v1.SubnetSelectorTerm, Subnet]
}

// NewProvider returns a Provider that calls api and caches each resolution
// for ttls.Default (cache.DefaultTTL unless the caches are off).
func NewProvider(api ec2api.API, ttls cache.TTLs) *Provider {
	return &Provider{api: api, resolver: cache.NewTermResolver[v1.SubnetSelectorTerm](ttls.Default,
		func(s Subnet) string { return s.ID },
		func(a, b Subnet) bool { return a.Zone < b.Zone || (a.Zone == b.Zone && a.ID < b.ID) })}
}

// List returns the subnets matching any of terms, sorted by zone then ID.
// An empty result is not an error; the caller names the EC2NodeClass field.
// Errors are DescribeSubnets failures (wrapped AWS API errors).
func (p *Provider) List(ctx context.Context, terms []v1.SubnetSelectorTerm) ([]Subnet, error) {
	return p.resolver.Resolve(terms, func(term v1.SubnetSelectorTerm) ([]Subnet, error) {
		filters := Filters(term)
		if len(filters) == 0 {
			return nil, nil
		}
		var found []Subnet
		pager := ec2.NewDescribeSubnetsPaginator(p.api, &ec2.DescribeSubnetsInput{Filters: filters})
		for pager.HasMorePages() {
			out, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing subnets: %w", err)
			}
			for _, s := range out.Subnets {
				found = append(found, Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone),
					ZoneID: aws.ToString(s.AvailabilityZoneId), AvailableIPs: aws.ToInt32(s.AvailableIpAddressCount)})
			}
		}
		return found, nil
	})
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
