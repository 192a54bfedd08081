package batcher

import (
	"context"
	"errors"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/karpx/karpx/autoscaler/providers/ec2api"
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
	results := make([]Result[ec2.DescribeInstancesOutput], len(reqs))
	if len(reqs) == 1 {
		out, err := a.singleDescribe(ctx, reqs[0])
		results[0] = Result[ec2.DescribeInstancesOutput]{Output: out, Err: err}
		return results
	}
	ids := unionIDs(reqs, func(r *describeRequest) []string { return r.in.InstanceIds })
	failed := map[string]error{} // id → the error of the callers asking for it
	for {
		out, err := a.next.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids}, reqs[0].optFns...)
		if err == nil {
			for i, r := range reqs {
				if err := firstFailure(r.in.InstanceIds, failed); err != nil {
					results[i].Err = err
					continue
				}
				results[i].Output = reservationsOf(out, r.in.InstanceIds)
			}
			return results
		}
		bad := badInstanceIDs(err, ids)
		if len(bad) == 0 {
			if !isInstanceIDError(err) {
				for i := range results {
					results[i].Err = err
				}
				return results
			}
			// EC2 named no id we sent: ask for each caller on its own.
			for i, r := range reqs {
				out, err := a.singleDescribe(ctx, r)
				results[i] = Result[ec2.DescribeInstancesOutput]{Output: out, Err: err}
			}
			return results
		}
		for _, id := range bad {
			failed[id] = err
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return failed[id] != nil })
		if len(ids) == 0 {
			for i, r := range reqs {
				results[i].Err = firstFailure(r.in.InstanceIds, failed)
			}
			return results
		}
	}
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

// unionIDs returns the distinct ids of reqs, in first-seen order.
func unionIDs[R any](reqs []*R, ids func(*R) []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range reqs {
		for _, id := range ids(r) {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// firstFailure returns the error recorded for the first of ids that has one.
func firstFailure(ids []string, failed map[string]error) error {
	for _, id := range ids {
		if err := failed[id]; err != nil {
			return err
		}
	}
	return nil
}

// instanceIDPattern matches instance ids in EC2 error messages, such as
// "The instance IDs 'i-0123456789abcdef0, i-0fedcba9876543210' do not exist".
var instanceIDPattern = regexp.MustCompile(`i-[0-9a-zA-Z]+`)

// isInstanceIDError reports whether err is EC2's answer to an unknown or
// malformed instance id, which fails the whole call.
func isInstanceIDError(err error) bool {
	code := ec2api.Code(err)
	return code == ec2api.CodeInstanceNotFound || code == "InvalidInstanceID.Malformed"
}

// badInstanceIDs returns the ids of sent that an instance-id error names.
func badInstanceIDs(err error, sent []string) []string {
	var apiErr smithy.APIError
	if !isInstanceIDError(err) || !errors.As(err, &apiErr) {
		return nil
	}
	var bad []string
	for _, id := range instanceIDPattern.FindAllString(apiErr.ErrorMessage(), -1) {
		if slices.Contains(sent, id) && !slices.Contains(bad, id) {
			bad = append(bad, id)
		}
	}
	return bad
}
