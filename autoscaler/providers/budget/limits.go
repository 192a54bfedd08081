package budget

import (
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// This file holds every budget karpx applies, with its source. Change
// limits here, nowhere else.
//
// EC2: "Request throttling for the Amazon EC2 API", Amazon EC2 Developer
// Guide, section "Request token bucket sizes and refill rates"
// (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html).
// EC2 throttles per account and region, and "each API is evaluated
// individually": every action has its own bucket, sized by its category.
// karpx mirrors that with one client-side bucket per action (and, for the
// actions EC2 charges differently when called bare, one more for their
// unfiltered calls), sized by the category at Options.Fraction.
//
// SSM: "AWS Systems Manager endpoints and quotas", AWS General Reference,
// Parameter Store: GetParameter default maximum throughput 40 transactions
// per second (shared with GetParameters). AWS documents no burst for it; karpx
// uses a bucket of 40 tokens refilled at 40 per second, so at the default
// fraction an idle controller can send 20 calls at once and 20 per second.

// Category names a throttling category: actions of a category have buckets
// of the same size and refill rate.
type Category string

// Throttling categories of the actions karpx calls.
const (
	// NonMutating is Describe* (DescribeSubnets, DescribeImages,
	// DescribeInstanceTypes, DescribeLaunchTemplates, filtered
	// DescribeInstances, ...): bucket 100, refill 20 per second.
	NonMutating Category = "non-mutating"
	// UnfilteredNonMutating is DescribeInstances and DescribeSecurityGroups
	// (and, in EC2, DescribeNetworkInterfaces, DescribeVolumes,
	// DescribeSnapshots, DescribeSpotInstanceRequests) called without
	// filters, ids, names and MaxResults: bucket 50, refill 10 per second.
	UnfilteredNonMutating Category = "unfiltered-non-mutating"
	// Mutating is Create*, Delete*, Modify* (CreateFleet,
	// CreateLaunchTemplate, DeleteLaunchTemplate): bucket 50, refill 5 per
	// second.
	Mutating Category = "mutating"
	// RunInstances is RunInstances: bucket 5, refill 2 per second. karpx
	// launches with CreateFleet; the category is listed for completeness.
	RunInstances Category = "run-instances"
	// TerminateInstances is TerminateInstances: bucket 100, refill 5 per
	// second.
	TerminateInstances Category = "terminate-instances"
	// CreateTags is CreateTags: bucket 100, refill 10 per second.
	CreateTags Category = "create-tags"
	// SSMGetParameter is SSM GetParameter: bucket 40, refill 40 per second.
	SSMGetParameter Category = "ssm-get-parameter"
)

// Bucket is the size of a token bucket: a request takes one token.
type Bucket struct {
	// Size is the capacity of the bucket, in requests (the burst).
	Size float64 `json:"size"`
	// RefillPerSecond is the sustained rate, in requests per second.
	RefillPerSecond float64 `json:"refillPerSecond"`
}

// DefaultFraction is the share of AWS's documented bucket sizes and refill
// rates karpx allows itself by default: half, leaving the other half to
// every other client of the account and region (consoles, CI, other
// controllers), which share EC2's buckets with karpx.
const DefaultFraction = 0.5

// AWSBuckets returns AWS's documented default bucket per category (see the
// top of this file for the sources). The map is new on every call.
func AWSBuckets() map[Category]Bucket {
	return map[Category]Bucket{
		NonMutating:           {Size: 100, RefillPerSecond: 20},
		UnfilteredNonMutating: {Size: 50, RefillPerSecond: 10},
		Mutating:              {Size: 50, RefillPerSecond: 5},
		RunInstances:          {Size: 5, RefillPerSecond: 2},
		TerminateInstances:    {Size: 100, RefillPerSecond: 5},
		CreateTags:            {Size: 100, RefillPerSecond: 10},
		SSMGetParameter:       {Size: 40, RefillPerSecond: 40},
	}
}

// Action names, as EC2 and SSM spell them; they label metrics and Status.
const (
	actionDescribeInstanceTypes         = "DescribeInstanceTypes"
	actionDescribeInstanceTypeOfferings = "DescribeInstanceTypeOfferings"
	actionDescribeAvailabilityZones     = "DescribeAvailabilityZones"
	actionDescribeSubnets               = "DescribeSubnets"
	actionDescribeSecurityGroups        = "DescribeSecurityGroups"
	actionDescribeImages                = "DescribeImages"
	actionCreateLaunchTemplate          = "CreateLaunchTemplate"
	actionDescribeLaunchTemplates       = "DescribeLaunchTemplates"
	actionDeleteLaunchTemplate          = "DeleteLaunchTemplate"
	actionCreateFleet                   = "CreateFleet"
	actionDescribeInstances             = "DescribeInstances"
	actionTerminateInstances            = "TerminateInstances"
	actionCreateTags                    = "CreateTags"
	actionDescribeSpotPriceHistory      = "DescribeSpotPriceHistory"
	actionGetParameter                  = "GetParameter"
)

// actionCategories maps every action of ec2api.API to its category when
// called with filters, ids or MaxResults.
var actionCategories = map[string]Category{
	actionDescribeInstanceTypes:         NonMutating,
	actionDescribeInstanceTypeOfferings: NonMutating,
	actionDescribeAvailabilityZones:     NonMutating,
	actionDescribeSubnets:               NonMutating,
	actionDescribeSecurityGroups:        NonMutating,
	actionDescribeImages:                NonMutating,
	actionDescribeLaunchTemplates:       NonMutating,
	actionDescribeSpotPriceHistory:      NonMutating,
	actionDescribeInstances:             NonMutating,
	actionCreateLaunchTemplate:          Mutating,
	actionDeleteLaunchTemplate:          Mutating,
	actionCreateFleet:                   Mutating,
	actionTerminateInstances:            TerminateInstances,
	actionCreateTags:                    CreateTags,
	actionGetParameter:                  SSMGetParameter,
}

// unfilteredDescribeInstances reports whether EC2 charges a
// DescribeInstances call to the unfiltered-and-unpaginated bucket: no
// instance ids, no filters, no MaxResults and no NextToken.
func unfilteredDescribeInstances(in *ec2.DescribeInstancesInput) bool {
	return in == nil || (len(in.InstanceIds) == 0 && len(in.Filters) == 0 && in.MaxResults == nil && in.NextToken == nil)
}

// unfilteredDescribeSecurityGroups is unfilteredDescribeInstances for
// DescribeSecurityGroups (no group ids or names either).
func unfilteredDescribeSecurityGroups(in *ec2.DescribeSecurityGroupsInput) bool {
	return in == nil || (len(in.GroupIds) == 0 && len(in.GroupNames) == 0 && len(in.Filters) == 0 && in.MaxResults == nil && in.NextToken == nil)
}
