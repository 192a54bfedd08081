package batcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// fleetResult is one caller's share of a CreateFleet answer.
type fleetResult struct {
	out *ec2.CreateFleetOutput
	// merged is true when the fleet was launched without the caller's
	// deferred tags.
	merged bool
}

// fleetRequest is one caller's CreateFleet.
type fleetRequest struct {
	in     *ec2.CreateFleetInput
	optFns []func(*ec2.Options)
}

// CreateFleet implements ec2api.API. Instant fleets that differ only in
// TotalTargetCapacity (and in the values of Options.DeferredTagKeys) are
// merged into one call for the sum of their capacities; each caller gets
// its share of the launched instances, and every caller gets the fleet's
// errors (the per-override errors, such as InsufficientInstanceCapacity,
// concern every caller's offerings). A caller for which too few instances
// were launched gets fewer, or none, and the errors. A failed call fails
// every caller. Requests with DryRun or a Type other than instant are not
// merged. A merged call of requests that all carry a ClientToken carries
// mergedToken of theirs, so that the same callers retrying the same launch
// get EC2's first answer again instead of a second set of instances; a
// merged call of others leaves the token to the SDK (one per call, kept
// across its retries). A merged call runs with the first request's optFns.
//
// A caller of a merged call gets its share as soon as CreateFleet answers;
// its deferred tags follow in the background (tagLater), so that a launch
// never waits for the CreateTags bucket.
func (a *API) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	res, err := a.fleet.Add(ctx, &fleetRequest{in: in, optFns: optFns})
	if err != nil {
		return nil, err
	}
	out := res.out
	if tags := a.deferredTags(in); res.merged && len(tags) > 0 && len(instanceIDs(out)) > 0 {
		a.tagLater(ctx, instanceIDs(out), tags, optFns)
	}
	return out, nil
}

// tagLater applies a merged caller's deferred tags to its instances with
// one CreateTags call, in a goroutine of its own, and returns at once.
// The instances exist whatever happens to the caller now, so the call
// outlives the caller's context (keeping its values, such as the budget
// priority), bounded by deferredTagTimeout and by Stop. A failure is
// logged and the instances run without those tags: losing an instance
// over a tag would leak it, and the NodeClaim claims its instance by
// providerID from the moment CreateFleet answers. After Stop, nothing
// starts: the instances are logged as untagged.
func (a *API) tagLater(ctx context.Context, ids []string, tags []ec2types.Tag, optFns []func(*ec2.Options)) {
	nodeClaim := tagValue(tags, a.nodeClaimTagKey)
	if !a.tagging.start() {
		a.log.Info("Not tagging launched instances: stopping; they run without their per-NodeClaim tags", "NodeClaim", nodeClaim, "instances", ids)
		return
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deferredTagTimeout)
	unlink := context.AfterFunc(a.stopTags, cancel)
	go func() {
		defer a.tagging.done()
		defer unlink()
		defer cancel()
		if _, err := a.next.CreateTags(tctx, &ec2.CreateTagsInput{Resources: ids, Tags: tags}, optFns...); err != nil {
			a.log.Error(err, "Tagging launched instances failed; they run without their per-NodeClaim tags", "NodeClaim", nodeClaim, "instances", ids)
		}
	}()
}

// WaitTagged blocks until no deferred CreateTags call is in flight, or ctx
// ends; it returns ctx.Err() in the second case and nil in the first.
// CreateFleet may start more calls meanwhile: WaitTagged returns at the
// first moment none is running.
func (a *API) WaitTagged(ctx context.Context) error {
	select {
	case <-a.tagging.idle():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop ends the deferred tagging, for a process that stops: no CreateTags
// call starts from now on (tagLater logs the instances of a later merged
// launch as untagged), the calls in flight get until ctx ends to finish,
// then are cancelled, and Stop returns once every one has returned. It
// returns nil when all finished in time, else ctx.Err(); the instances of
// cancelled calls run without their deferred tags.
func (a *API) Stop(ctx context.Context) error {
	idle := a.tagging.stop()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	a.cancelTags()
	<-idle // the calls return once cancelled: the budget's wait and the SDK honour their context
	return ctx.Err()
}

// inFlight counts calls in flight and tells when none is. Unlike
// sync.WaitGroup, calls may start while another goroutine waits.
type inFlight struct {
	mu sync.Mutex
	n  int
	// zero is closed while n is 0; a new channel is made when n leaves 0.
	zero chan struct{}
	// stopped refuses new calls (stop).
	stopped bool
}

// start counts one more call and reports true, or reports false after
// stop.
func (f *inFlight) start() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	if f.n == 0 || f.zero == nil {
		f.zero = make(chan struct{})
	}
	f.n++
	return true
}

// done counts one call less.
func (f *inFlight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		close(f.zero)
	}
}

// idle returns a channel that is closed once no call is in flight (at
// once when none is).
func (f *inFlight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idleLocked()
}

func (f *inFlight) idleLocked() <-chan struct{} {
	if f.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return f.zero
}

// stop refuses every later start and returns idle's channel.
func (f *inFlight) stop() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	return f.idleLocked()
}

// tagValue returns the value of key among tags, or "" when key is empty or
// absent.
func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if key != "" && aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// deferredTagTimeout bounds a deferred CreateTags call, its wait for a
// client-side budget token and its retries included: 15 minutes. Since
// the call no longer holds up the launch, the bound only has to outlast
// the CreateTags bucket's queue after the largest burst: karpx's default
// share of EC2's CreateTags bucket (100 tokens refilled at 10/s, halved:
// 50 and 5/s; catalog/awsquota) tags about 4,500 instances in 15 minutes,
// one call each; the head-to-head's 2,000-pod burst launches about 500.
const deferredTagTimeout = 15 * time.Minute

func (a *API) singleFleet(ctx context.Context, r *fleetRequest) (*fleetResult, error) {
	out, err := a.next.CreateFleet(ctx, r.in, r.optFns...)
	return &fleetResult{out: out}, err
}

func fleetWeight(r *fleetRequest) int { return max(1, int(fleetCapacity(r.in))) }

func fleetCapacity(in *ec2.CreateFleetInput) int32 {
	if in.TargetCapacitySpecification == nil {
		return 0
	}
	return aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity)
}

// fleetKey hashes the request with TotalTargetCapacity and the deferred
// tags removed and tags sorted.
func (a *API) fleetKey(r *fleetRequest) (string, bool) {
	in := r.in
	if in.Type != ec2types.FleetTypeInstant || aws.ToBool(in.DryRun) ||
		in.TargetCapacitySpecification == nil || fleetCapacity(in) < 1 {
		return "", false
	}
	return hashJSON(a.mergeable(in, 0))
}

// mergeable returns a copy of in with total capacity total, without the
// deferred tags and ClientToken, tags sorted by key. It shares the other
// fields with in.
func (a *API) mergeable(in *ec2.CreateFleetInput, total int32) *ec2.CreateFleetInput {
	c := *in
	c.ClientToken = nil
	tcs := *in.TargetCapacitySpecification
	tcs.TotalTargetCapacity = aws.Int32(total)
	c.TargetCapacitySpecification = &tcs
	c.TagSpecifications = make([]ec2types.TagSpecification, 0, len(in.TagSpecifications))
	for _, ts := range in.TagSpecifications {
		ts.Tags = slices.DeleteFunc(slices.Clone(ts.Tags), func(t ec2types.Tag) bool { return a.deferred[aws.ToString(t.Key)] })
		slices.SortFunc(ts.Tags, func(x, y ec2types.Tag) int { return strings.Compare(aws.ToString(x.Key), aws.ToString(y.Key)) })
		c.TagSpecifications = append(c.TagSpecifications, ts)
	}
	return &c
}

// deferredTags returns the instance tags of in whose keys are deferred.
func (a *API) deferredTags(in *ec2.CreateFleetInput) []ec2types.Tag {
	if len(a.deferred) == 0 {
		return nil
	}
	var tags []ec2types.Tag
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType != ec2types.ResourceTypeInstance {
			continue
		}
		for _, t := range ts.Tags {
			if a.deferred[aws.ToString(t.Key)] {
				tags = append(tags, t)
			}
		}
	}
	return tags
}

func (a *API) execFleet(ctx context.Context, reqs []*fleetRequest) []Result[fleetResult] {
	results := make([]Result[fleetResult], len(reqs))
	var total int32
	for _, r := range reqs {
		total += fleetCapacity(r.in)
	}
	// A batch of one keeps its own request, deferred tags included.
	in, merged := reqs[0].in, len(reqs) > 1
	if merged {
		in = a.mergeable(in, total)
		in.ClientToken = mergedToken(reqs)
	}
	out, err := a.next.CreateFleet(ctx, in, reqs[0].optFns...)
	if err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	// Hand out the instances in order, one CreateFleetInstance per id.
	type slot struct {
		fi ec2types.CreateFleetInstance
		id string
	}
	var slots []slot
	for _, fi := range out.Instances {
		for _, id := range fi.InstanceIds {
			slots = append(slots, slot{fi, id})
		}
	}
	next := 0
	for i, r := range reqs {
		share := &ec2.CreateFleetOutput{FleetId: out.FleetId, Errors: out.Errors, ResultMetadata: out.ResultMetadata}
		for n := fleetCapacity(r.in); n > 0 && next < len(slots); n-- {
			fi := slots[next].fi
			fi.InstanceIds = []string{slots[next].id}
			share.Instances = append(share.Instances, fi)
			next++
		}
		results[i].Output = &fleetResult{out: share, merged: merged}
	}
	if next < len(slots) {
		extra := make([]string, 0, len(slots)-next)
		for _, s := range slots[next:] {
			extra = append(extra, s.id)
		}
		a.log.Error(nil, "CreateFleet launched more instances than requested; the surplus is left to instance garbage collection",
			"requested", total, "surplus", extra)
	}
	return results
}

// mergedToken returns the ClientToken of a merged CreateFleet: "karpx-"
// and 40 hex digits of the SHA-256 of the requests' tokens, in order (58
// characters, within EC2's 64), or nil when a request has none.
func mergedToken(reqs []*fleetRequest) *string {
	h := sha256.New()
	for _, r := range reqs {
		if r.in.ClientToken == nil {
			return nil
		}
		h.Write([]byte(*r.in.ClientToken))
		h.Write([]byte{0})
	}
	return aws.String("karpx-" + hex.EncodeToString(h.Sum(nil))[:40])
}

// instanceIDs lists the instances of a CreateFleet answer.
func instanceIDs(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	return ids
}
