package ec2api

import (
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TagFilters turns the tags of an EC2NodeClass selector term into EC2
// Describe* filters, ANDed by EC2: "tag:<key>" = value, or "tag-key" = key
// when the value is "*" (any value, as in Karpenter's selector terms). Keys
// are sorted so equal terms give byte-identical requests.
func TagFilters(tags map[string]string) []ec2types.Filter {
	keys := slices.Sorted(maps.Keys(tags))
	filters := make([]ec2types.Filter, 0, len(keys))
	for _, k := range keys {
		if tags[k] == "*" {
			filters = append(filters, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return filters
}

// Filter returns one EC2 filter with the given name and values.
func Filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}
