// Package selector resolves an EC2NodeClass's selector terms (subnets,
// security groups) with one paginated EC2 Describe call per term, through
// cache.TermResolver: the one implementation the subnet and securitygroup
// providers share.
package selector
