package batcher

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// terminateRequest is one caller's TerminateInstances.
type terminateRequest struct {
	in     *ec2.TerminateInstancesInput
	optFns []func(*ec2.Options)
}

// TerminateInstances implements ec2api.API. Calls without DryRun and
// SkipOsShutdown/Force options are merged into one call for the union of
// their ids; each caller gets the state changes of its own ids. EC2
// terminates none of the instances of a call that names an unknown id, so
// when the merged call fails with InvalidInstanceID.NotFound or .Malformed,
// the callers of the ids named in the message get that error and the rest
// are terminated by a second call; an error naming no id of the batch
// falls back to one call per caller.
func (a *API) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return a.terminate.Add(ctx, &terminateRequest{in: in, optFns: optFns})
}

func terminateKey(r *terminateRequest) (string, bool) {
	in := r.in
	plain := len(in.InstanceIds) > 0 && !aws.ToBool(in.DryRun) && in.Force == nil && in.SkipOsShutdown == nil
	return "", plain
}

func terminateWeight(r *terminateRequest) int { return len(r.in.InstanceIds) }

func (a *API) singleTerminate(ctx context.Context, r *terminateRequest) (*ec2.TerminateInstancesOutput, error) {
	return a.next.TerminateInstances(ctx, r.in, r.optFns...)
}

func (a *API) execTerminate(ctx context.Context, reqs []*terminateRequest) []Result[ec2.TerminateInstancesOutput] {
	return execByIDs(ctx, reqs, byIDs[terminateRequest, ec2.TerminateInstancesOutput]{
		ids:  func(r *terminateRequest) []string { return r.in.InstanceIds },
		each: a.singleTerminate,
		union: func(ctx context.Context, ids []string, optFns []func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
			return a.next.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}, optFns...)
		},
		optFns: func(r *terminateRequest) []func(*ec2.Options) { return r.optFns },
		share:  stateChangesOf,
	})
}

// stateChangesOf returns the part of out about ids.
func stateChangesOf(out *ec2.TerminateInstancesOutput, ids []string) *ec2.TerminateInstancesOutput {
	share := &ec2.TerminateInstancesOutput{ResultMetadata: out.ResultMetadata}
	for _, sc := range out.TerminatingInstances {
		if slices.Contains(ids, aws.ToString(sc.InstanceId)) {
			share.TerminatingInstances = append(share.TerminatingInstances, sc)
		}
	}
	return share
}
