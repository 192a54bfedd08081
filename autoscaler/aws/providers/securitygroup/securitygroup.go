package securitygroup

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/selector"
)

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID is the group ID, for example "sg-0123456789abcdef0".
	ID string
	// Name is the group name.
	Name string
}

// Provider resolves security group selector terms; its List returns the
// groups matching any of the terms, sorted by ID (an empty result is not an
// error; the caller names the EC2NodeClass field), and fails with the
// wrapped DescribeSecurityGroups error. It is safe for concurrent use.
type Provider = selector.Resolver[v1.SecurityGroupSelectorTerm, *ec2.DescribeSecurityGroupsOutput, SecurityGroup]

// NewProvider returns a Provider calling DescribeSecurityGroups on api
// once per term, with a cache of ttls.Default (cache.DefaultTTL unless the
// caches are off).
func NewProvider(api ec2api.API, ttls cache.TTLs) *Provider {
	byID := func(a, b SecurityGroup) bool { return a.ID < b.ID }
	return selector.New(ttls.Default, func(g SecurityGroup) string { return g.ID }, byID,
		selector.Describe[v1.SecurityGroupSelectorTerm, *ec2.DescribeSecurityGroupsOutput, SecurityGroup]{
			What: "security groups", Filters: Filters, Items: groupsOf,
			Pages: func(filters []ec2types.Filter) selector.Pages[*ec2.DescribeSecurityGroupsOutput] {
				return ec2.NewDescribeSecurityGroupsPaginator(api, &ec2.DescribeSecurityGroupsInput{Filters: filters})
			},
		})
}

// groupsOf returns the security groups of one DescribeSecurityGroups page.
func groupsOf(out *ec2.DescribeSecurityGroupsOutput) []SecurityGroup {
	groups := make([]SecurityGroup, 0, len(out.SecurityGroups))
	for _, g := range out.SecurityGroups {
		groups = append(groups, SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)})
	}
	return groups
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
