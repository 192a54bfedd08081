package securitygroup

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID is the group ID, for example "sg-0123456789abcdef0".
	ID string
	// Name is the group name.
	Name string
}

// Provider resolves security group selector terms. It is safe for
// concurrent use.
type Provider struct {
	api      ec2api.API
	resolver *cache.TermResolver[v1.SecurityGroupSelectorTerm, SecurityGroup]
}

// NewProvider returns a Provider that calls api and caches each resolution
// for ttls.Default (cache.DefaultTTL unless the caches are off).
func NewProvider(api ec2api.API, ttls cache.TTLs) *Provider {
	return &Provider{api: api, resolver: cache.NewTermResolver[v1.SecurityGroupSelectorTerm](ttls.Default,
		func(g SecurityGroup) string { return g.ID },
		func(a, b SecurityGroup) bool { return a.ID < b.ID })}
}

// List returns the security groups matching any of terms, sorted by ID. An
// empty result is not an error; the caller names the EC2NodeClass field.
// Errors are DescribeSecurityGroups failures (wrapped AWS API errors).
func (p *Provider) List(ctx context.Context, terms []v1.SecurityGroupSelectorTerm) ([]SecurityGroup, error) {
	return p.resolver.Resolve(terms, func(term v1.SecurityGroupSelectorTerm) ([]SecurityGroup, error) {
		filters := Filters(term)
		if len(filters) == 0 {
			return nil, nil
		}
		var found []SecurityGroup
		pager := ec2.NewDescribeSecurityGroupsPaginator(p.api, &ec2.DescribeSecurityGroupsInput{Filters: filters})
		for pager.HasMorePages() {
			out, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing security groups: %w", err)
			}
			for _, g := range out.SecurityGroups {
				found = append(found, SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)})
			}
		}
		return found, nil
	})
}

// IDs returns the IDs of groups, in order.
func IDs(groups []SecurityGroup) []string {
	ids := make([]string, 0, len(groups))
	for _, g := range groups {
		ids = append(ids, g.ID)
	}
	return ids
}

// Filters returns the DescribeSecurityGroups filters of one selector term;
// empty for an empty term (which selects nothing).
func Filters(term v1.SecurityGroupSelectorTerm) []ec2types.Filter {
	var filters []ec2types.Filter
	if term.ID != "" {
		filters = append(filters, ec2api.Filter("group-id", term.ID))
	}
	if term.Name != "" {
		filters = append(filters, ec2api.Filter("group-name", term.Name))
	}
	return append(filters, ec2api.TagFilters(term.Tags)...)
}
