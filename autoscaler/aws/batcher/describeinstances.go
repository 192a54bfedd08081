package batcher

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// describeRequest is one caller's DescribeInstances by instance ids.
type describeRequest struct {
	in     *ec2.DescribeInstancesInput
	optFns []func(*ec2.Options)
}

// DescribeInstances implements ec2api.API. Calls by instance ids only (no
// filters, MaxResults, NextToken or DryRun) are merged into one call for
// the union of the ids; each caller gets the reservations of its own ids
// (a reservation is copied with only those instances). An id missing from
// the answer yields no instance for its caller, which reads it as EC2's
// InvalidInstanceID.NotFound: instance.Provider.Get returns
// NodeClaimNotFoundError either way. When EC2 fails the merged call with
// InvalidInstanceID.NotFound or .Malformed, the ids named in its message
// get that error and the others are asked again without them; errors that
// name no id of the batch fall back to one call per caller. Every other
// call passes through.
func (a *API) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return a.describe.Add(ctx, &describeRequest{in: in, optFns: optFns})
}

func describeKey(r *describeRequest) (string, bool) {
	in := r.in
	ok := len(in.InstanceIds) > 0 && len(in.Filters) == 0 && in.MaxResults == nil && in.NextToken == nil && !aws.ToBool(in.DryRun)
	return "", ok
}

func describeWeight(r *describeRequest) int { return len(r.in.InstanceIds) }

func (a *API) singleDescribe(ctx context.Context, r *describeRequest) (*ec2.DescribeInstancesOutput, error) {
	return a.next.DescribeInstances(ctx, r.in, r.optFns...)
}

func (a *API) execDescribe(ctx context.Context, reqs []*describeRequest) []Result[ec2.DescribeInstancesOutput] {
	return execByIDs(ctx, reqs, byIDs[describeRequest, ec2.DescribeInstancesOutput]{
		ids:  func(r *describeRequest) []string { return r.in.InstanceIds },
		each: a.singleDescribe,
		union: func(ctx context.Context, ids []string, optFns []func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
			return a.next.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids}, optFns...)
		},
		optFns: func(r *describeRequest) []func(*ec2.Options) { return r.optFns },
		share:  reservationsOf,
	})
}

// reservationsOf returns the part of out about ids, with reservations
// copied to hold only those instances.
func reservationsOf(out *ec2.DescribeInstancesOutput, ids []string) *ec2.DescribeInstancesOutput {
	share := &ec2.DescribeInstancesOutput{ResultMetadata: out.ResultMetadata}
	for _, res := range out.Reservations {
		var mine []ec2types.Instance
		for _, inst := range res.Instances {
			if slices.Contains(ids, aws.ToString(inst.InstanceId)) {
				mine = append(mine, inst)
			}
		}
		if len(mine) > 0 {
			res.Instances = mine
			share.Reservations = append(share.Reservations, res)
		}
	}
	return share
}
