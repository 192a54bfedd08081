// Package securitygroup resolves an EC2NodeClass's
// spec.securityGroupSelectorTerms to security groups with
// DescribeSecurityGroups.
//
// Each term becomes one call whose filters are ANDed: "id" becomes a
// group-id filter, "name" a group-name filter (the group's name, not its
// Name tag), each tag a tag:<key>=<value> filter and a "*" tag value a
// tag-key filter. Results of all terms are ORed and deduplicated by group
// ID, and cached per set of terms for cache.DefaultTTL.
package securitygroup
