package budget

import (
	"reflect"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/catalog/awsquota"
)

// The budgets karpx applies are AWS's buckets from catalog/awsquota (the
// one table of categories, sizes, refill rates and sources, which the EC2
// simulator throttles with too), scaled by Options.Fraction. EC2 throttles
// per account and region, and "each API is evaluated individually": karpx
// mirrors that with one client-side bucket per action of ec2api.API (and,
// for the actions awsquota.Charge.Unfiltered marks, one more for their
// bare calls), sized by the action's category.

// DefaultFraction is the share of AWS's documented bucket sizes and refill
// rates karpx allows itself by default: half, leaving the other half to
// every other client of the account and region (consoles, CI, other
// controllers), which share EC2's buckets with karpx.
const DefaultFraction = 0.5

// bucketKey names a client-side bucket: an action, and for the actions
// with an unfiltered bucket, which of their two buckets.
type bucketKey struct {
	action     string
	unfiltered bool
}

// budgetedKeys returns the key of every bucket the budget keeps: one per
// method of ec2api.API (method names are the EC2 and SSM operation names)
// and one more per action awsquota charges differently when called bare,
// sorted by action. It panics when awsquota does not list an operation of
// ec2api.API, a programming error TestEveryAPIOperationHasABucket catches.
func budgetedKeys() []bucketKey {
	api := reflect.TypeFor[ec2api.API]()
	var keys []bucketKey
	for i := range api.NumMethod() {
		action := api.Method(i).Name
		ch, ok := awsquota.ChargeOf(action)
		if !ok {
			panic("budget: catalog/awsquota has no charge for ec2api.API." + action)
		}
		keys = append(keys, bucketKey{action: action})
		if ch.Unfiltered {
			keys = append(keys, bucketKey{action: action, unfiltered: true})
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].action != keys[j].action {
			return keys[i].action < keys[j].action
		}
		return !keys[i].unfiltered
	})
	return keys
}

// isBare reports whether EC2 charges a call with input in (an operation's
// *Input) to the unfiltered bucket of its action: a DescribeInstances or
// DescribeSecurityGroups call without ids, names, filters, MaxResults and
// NextToken. Other inputs are never bare.
func isBare(in any) bool {
	switch in := in.(type) {
	case *ec2.DescribeInstancesInput:
		return in == nil || (len(in.InstanceIds) == 0 && len(in.Filters) == 0 && in.MaxResults == nil && in.NextToken == nil)
	case *ec2.DescribeSecurityGroupsInput:
		return in == nil || (len(in.GroupIds) == 0 && len(in.GroupNames) == 0 && len(in.Filters) == 0 && in.MaxResults == nil && in.NextToken == nil)
	}
	return false
}

// callInstances returns the number of instances a call launches (a
// CreateFleet's TotalTargetCapacity) or terminates (a TerminateInstances'
// instance ids), at least 1; any other call counts 1. The batcher merges
// the launches and terminations of many NodeClaims into one such call,
// which takes one token like any other.
func callInstances(in any) int {
	n := 1
	switch in := in.(type) {
	case *ec2.CreateFleetInput:
		if in != nil && in.TargetCapacitySpecification != nil {
			n = int(aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity))
		}
	case *ec2.TerminateInstancesInput:
		if in != nil {
			n = len(in.InstanceIds)
		}
	}
	return max(n, 1)
}
