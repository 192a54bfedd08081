package batcher

import (
	"context"
	"errors"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

// byIDs describes an EC2 action whose calls name instances by id
// (DescribeInstances, TerminateInstances) for execByIDs. R is one caller's
// request, Out the action's output.
type byIDs[R, Out any] struct {
	// ids returns the instance ids a caller names.
	ids func(*R) []string
	// each makes a caller's own call, unchanged.
	each func(context.Context, *R) (*Out, error)
	// union makes one call for ids with optFns.
	union func(ctx context.Context, ids []string, optFns []func(*ec2.Options)) (*Out, error)
	// optFns returns a caller's per-call options (the first caller's are
	// used for the union call).
	optFns func(*R) []func(*ec2.Options)
	// share returns the part of a union answer about ids.
	share func(out *Out, ids []string) *Out
}

// execByIDs answers reqs with one call for the union of their ids. EC2
// fails a whole call that names an unknown or malformed id, so when the
// union call fails with InvalidInstanceID.NotFound or .Malformed, the
// callers of the ids named in the message get that error and the rest are
// asked again without them; an instance-id error that names no id of the
// batch falls back to one call per caller; any other error goes to every
// caller.
func execByIDs[R, Out any](ctx context.Context, reqs []*R, act byIDs[R, Out]) []Result[Out] {
	results := make([]Result[Out], len(reqs))
	if len(reqs) == 1 {
		out, err := act.each(ctx, reqs[0])
		results[0] = Result[Out]{Output: out, Err: err}
		return results
	}
	ids := unionIDs(reqs, act.ids)
	failed := map[string]error{} // id → the error of the callers asking for it
	for {
		out, err := act.union(ctx, ids, act.optFns(reqs[0]))
		if err == nil {
			for i, r := range reqs {
				if err := firstFailure(act.ids(r), failed); err != nil {
					results[i].Err = err
					continue
				}
				results[i].Output = act.share(out, act.ids(r))
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
				out, err := act.each(ctx, r)
				results[i] = Result[Out]{Output: out, Err: err}
			}
			return results
		}
		for _, id := range bad {
			failed[id] = err
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return failed[id] != nil })
		if len(ids) == 0 {
			for i, r := range reqs {
				results[i].Err = firstFailure(act.ids(r), failed)
			}
			return results
		}
	}
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
	return code == ec2api.CodeInstanceNotFound || code == ec2api.CodeInstanceIDMalformed
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
