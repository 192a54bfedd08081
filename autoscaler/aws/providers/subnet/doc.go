// Package subnet resolves an EC2NodeClass's spec.subnetSelectorTerms to
// subnets with DescribeSubnets.
//
// Each term becomes one DescribeSubnets call whose filters are ANDed: "id"
// becomes a subnet-id filter, each tag becomes a tag:<key>=<value> filter,
// and a tag whose value is "*" becomes a tag-key filter (any value). The
// results of all terms are ORed and deduplicated by subnet ID. Results are
// cached per set of terms for cache.DefaultTTL.
package subnet
