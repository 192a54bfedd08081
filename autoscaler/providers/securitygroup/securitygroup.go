package securitygroup

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/golang-lru/v2/expirable"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/providers/cache"
	"github.com/karpx/karpx/autoscaler/providers/ec2api"
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
	api   ec2api.API
	mu    sync.Mutex
	cache *expirable.LRU[string, []SecurityGroup]
}

// NewProvider returns a Provider that calls api and caches each resolution
// for cache.DefaultTTL.
func NewProvider(api ec2api.API, ttls cache.TTLs) *Provider {
	return &Provider{api: api, cache: expirable.NewLRU[string, []SecurityGroup](cache.NodeClassEntries, nil, cache.DefaultTTL)}
}

// List returns the security groups matching any of terms, sorted by ID. An
// empty result is not an error; the caller names the EC2NodeClass field.
func (p *Provider) List(ctx context.Context, terms []v1.SecurityGroupSelectorTerm) ([]SecurityGroup, error) {
	keyBytes, err := json.Marshal(terms)
	if err != nil {
		return nil, fmt.Errorf("encoding security group selector terms: %w", err)
	}
	key := string(keyBytes)
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.cache.Get(key); ok {
		return g, nil
	}
	byID := map[string]SecurityGroup{}
	for _, term := range terms {
		filters := Filters(term)
		if len(filters) == 0 {
			continue
		}
		pager := ec2.NewDescribeSecurityGroupsPaginator(p.api, &ec2.DescribeSecurityGroupsInput{Filters: filters})
		for pager.HasMorePages() {
			out, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing security groups: %w", err)
			}
			for _, g := range out.SecurityGroups {
				id := aws.ToString(g.GroupId)
				byID[id] = SecurityGroup{ID: id, Name: aws.ToString(g.GroupName)}
			}
		}
	}
	groups := make([]SecurityGroup, 0, len(byID))
	for _, g := range byID {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].ID < groups[j].ID })
	p.cache.Add(key, groups)
	return groups, nil
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
