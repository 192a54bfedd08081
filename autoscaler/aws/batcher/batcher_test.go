package batcher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/karpx/karpx/autoscaler/aws/batcher"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/ec2sim"
)

// launch runs n concurrent CreateFleet calls, the i-th for template
// lt(i) with tags tags(i), and returns the instance ids each got.
func launch(t *testing.T, api ec2api.API, n int, lt func(int) string, tags func(int) map[string]string) [][]string {
	t.Helper()
	got := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out, err := api.CreateFleet(context.Background(), fleet(lt(i), tags(i)), ec2apitest.Loopback)
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
				return
			}
			if len(out.Errors) != 0 {
				t.Errorf("caller %d: fleet errors %+v", i, out.Errors)
			}
			for _, fi := range out.Instances {
				got[i] = append(got[i], fi.InstanceIds...)
			}
		})
	}
	wg.Wait()
	return got
}

func noTags(int) map[string]string { return nil }

// oneEach checks that every caller got exactly one instance and that no
// two callers got the same one.
func oneEach(t *testing.T, got [][]string) []string {
	t.Helper()
	seen := map[string]int{}
	var ids []string
	for i, g := range got {
		if len(g) != 1 {
			t.Errorf("caller %d got %v, want one instance", i, g)
			continue
		}
		if j, dup := seen[g[0]]; dup {
			t.Errorf("callers %d and %d both got %s", j, i, g[0])
		}
		seen[g[0]] = i
		ids = append(ids, g[0])
	}
	return ids
}

func TestCreateFleetMergesSameLaunchTemplate(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	reg := prometheus.NewRegistry()
	api := batcher.New(e.Client, batcher.Options{Registerer: reg})
	ids := oneEach(t, launch(t, api, 10, func(int) string { return "lt-a" }, noTags))
	if n := e.Sim.Counts()["CreateFleet"]; n != 1 {
		t.Errorf("simulator got %d CreateFleet calls, want 1", n)
	}
	if len(ids) != 10 || len(e.Sim.Instances()) != 10 {
		t.Errorf("%d instances handed out, %d launched; want 10", len(ids), len(e.Sim.Instances()))
	}
	families, err := reg.Gather()
	if err != nil || len(families) == 0 {
		t.Errorf("no batcher metrics registered: %v", err)
	}
}

func TestCreateFleetKeepsLaunchTemplatesApart(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	launchTemplate(t, e, "lt-b")
	api := batcher.New(e.Client, batcher.Options{})
	lt := func(i int) string { return []string{"lt-a", "lt-b"}[i%2] }
	oneEach(t, launch(t, api, 10, lt, noTags))
	if n := e.Sim.Counts()["CreateFleet"]; n != 2 {
		t.Errorf("simulator got %d CreateFleet calls, want 2 (one per template)", n)
	}
	byTemplate := map[string]int{}
	for _, inst := range e.Sim.Instances() {
		byTemplate[inst.LaunchTemplateID]++
	}
	if len(byTemplate) != 2 {
		t.Errorf("instances per template %v", byTemplate)
	}
	// Different per-NodeClaim tags keep requests apart too, unless deferred.
	e2 := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e2, "lt-a")
	tags := func(i int) map[string]string {
		return map[string]string{"karpenter.sh/nodeclaim": fmt.Sprintf("nc-%d", i), "Name": fmt.Sprintf("nc-%d", i), "karpenter.sh/nodepool": "default"}
	}
	oneEach(t, launch(t, batcher.New(e2.Client, batcher.Options{}), 4, func(int) string { return "lt-a" }, tags))
	if n := e2.Sim.Counts()["CreateFleet"]; n != 4 {
		t.Errorf("without deferred tags: %d CreateFleet calls, want 4", n)
	}
}

func TestCreateFleetDefersPerNodeClaimTags(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	api := batcher.New(e.Client, batcher.Options{DeferredTagKeys: instance.NodeClaimTagKeys})
	tags := func(i int) map[string]string {
		return map[string]string{"karpenter.sh/nodeclaim": fmt.Sprintf("nc-%d", i), "Name": fmt.Sprintf("nc-%d", i), "karpenter.sh/nodepool": "default"}
	}
	got := launch(t, api, 6, func(int) string { return "lt-a" }, tags)
	oneEach(t, got)
	if err := api.WaitTagged(context.Background()); err != nil {
		t.Fatal(err)
	}
	counts := e.Sim.Counts()
	if counts["CreateFleet"] != 1 || counts["CreateTags"] != 6 {
		t.Errorf("calls %v, want 1 CreateFleet and 6 CreateTags", counts)
	}
	byID := map[string]ec2sim.Instance{}
	for _, inst := range e.Sim.Instances() {
		byID[inst.ID] = inst
	}
	for i, g := range got {
		if len(g) != 1 {
			continue
		}
		tags := byID[g[0]].Tags
		if want := fmt.Sprintf("nc-%d", i); tags["karpenter.sh/nodeclaim"] != want || tags["Name"] != want || tags["karpenter.sh/nodepool"] != "default" {
			t.Errorf("caller %d's instance %s has tags %v", i, g[0], tags)
		}
	}
}

// blockingTags is an ec2api.API whose CreateTags calls wait until release
// is closed, then go to the embedded API.
type blockingTags struct {
	ec2api.API
	started chan string // receives the first resource of each CreateTags call
	release chan struct{}
}

func (b *blockingTags) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	b.started <- in.Resources[0]
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.API.CreateTags(ctx, in, optFns...)
}

// A merged launch returns with CreateFleet's answer: it does not wait for
// its deferred CreateTags, which lands afterwards.
func TestCreateFleetReturnsBeforeDeferredTags(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	const n = 4
	next := &blockingTags{API: e.Client, started: make(chan string, n), release: make(chan struct{})}
	api := batcher.New(next, batcher.Options{DeferredTagKeys: instance.NodeClaimTagKeys, NodeClaimTagKey: instance.TagNodeClaim})
	tags := func(i int) map[string]string {
		return map[string]string{"karpenter.sh/nodeclaim": fmt.Sprintf("nc-%d", i), "Name": fmt.Sprintf("nc-%d", i), "karpenter.sh/nodepool": "default"}
	}
	// launch returns only when every CreateFleet call has, which must
	// happen with the tags still held back. The minute only bounds how long
	// a regression (a launch waiting for its tags) hangs before it fails.
	done := make(chan [][]string, 1)
	go func() { done <- launch(t, api, n, func(int) string { return "lt-a" }, tags) }()
	var got [][]string
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		close(next.release)
		<-done
		t.Fatal("CreateFleet returned only after its deferred CreateTags was released")
	}
	ids := oneEach(t, got)
	for _, inst := range e.Sim.Instances() {
		if inst.Tags["karpenter.sh/nodeclaim"] != "" {
			t.Errorf("instance %s tagged %v before its CreateTags was released", inst.ID, inst.Tags)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := api.WaitTagged(ctx); err == nil {
		t.Error("WaitTagged returned nil with CreateTags calls held back and its context done")
	}
	close(next.release)
	if err := api.WaitTagged(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(next.started) != n {
		t.Errorf("%d CreateTags calls, want %d (one per caller)", len(next.started), n)
	}
	byID := map[string]ec2sim.Instance{}
	for _, inst := range e.Sim.Instances() {
		byID[inst.ID] = inst
	}
	for i, g := range got {
		if len(g) == 1 && byID[g[0]].Tags["karpenter.sh/nodeclaim"] != fmt.Sprintf("nc-%d", i) {
			t.Errorf("caller %d's instance %s has tags %v after WaitTagged", i, g[0], byID[g[0]].Tags)
		}
	}
	if len(ids) != n {
		t.Errorf("%d instances handed out, want %d", len(ids), n)
	}
}

// Stop lets no deferred CreateTags call outlive it: the ones in flight are
// cancelled once its context ends, and a merged launch after it starts
// none.
func TestStopCancelsDeferredTags(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	next := &blockingTags{API: e.Client, started: make(chan string, 10), release: make(chan struct{})}
	api := batcher.New(next, batcher.Options{DeferredTagKeys: instance.NodeClaimTagKeys, NodeClaimTagKey: instance.TagNodeClaim})
	tags := func(i int) map[string]string {
		return map[string]string{"karpenter.sh/nodeclaim": fmt.Sprintf("nc-%d", i), "Name": fmt.Sprintf("nc-%d", i)}
	}
	oneEach(t, launch(t, api, 3, func(int) string { return "lt-a" }, tags))
	for range 3 {
		<-next.started // every call is held in CreateTags
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := api.Stop(ctx); err != context.Canceled {
		t.Errorf("Stop with held calls and a done context = %v, want context.Canceled", err)
	}
	// Stop returned: every call has returned too (bounded, so that a
	// regression fails instead of hanging).
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if err := api.WaitTagged(wctx); err != nil {
		t.Fatalf("deferred CreateTags calls still in flight after Stop returned: %v", err)
	}
	oneEach(t, launch(t, api, 2, func(int) string { return "lt-a" }, tags))
	if n := len(next.started); n != 0 {
		t.Errorf("%d CreateTags calls started after Stop, want 0", n)
	}
	for _, inst := range e.Sim.Instances() {
		if inst.Tags["karpenter.sh/nodeclaim"] != "" {
			t.Errorf("instance %s tagged %v: its call was cancelled or never made", inst.ID, inst.Tags)
		}
	}
	if err := api.Stop(context.Background()); err != nil {
		t.Errorf("Stop again with nothing in flight = %v, want nil", err)
	}
}

func TestCreateFleetSharesErrors(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	// No capacity in either pool: every caller gets no instance and the
	// fleet's InsufficientInstanceCapacity errors.
	if err := e.Sim.Faults().AddCapacity(ec2sim.CapacityFault{InstanceType: "m5.*"}); err != nil {
		t.Fatal(err)
	}
	api := batcher.New(e.Client, batcher.Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	withInstance, withICE := 0, 0
	for range 5 {
		wg.Go(func() {
			out, err := api.CreateFleet(context.Background(), fleet("lt-a", nil), ec2apitest.Loopback)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if len(out.Instances) == 1 {
				withInstance++
			}
			if len(out.Errors) == 2 && ec2api.IsInsufficientCapacity(aws.ToString(out.Errors[0].ErrorCode)) {
				withICE++
			}
		})
	}
	wg.Wait()
	if e.Sim.Counts()["CreateFleet"] != 1 || withInstance != 0 || withICE != 5 {
		t.Errorf("%d CreateFleet calls, %d callers with an instance, %d with the fleet's two ICE errors; want 1, 0, 5",
			e.Sim.Counts()["CreateFleet"], withInstance, withICE)
	}
}

func TestDescribeAndTerminateInstancesMerged(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	api := batcher.New(e.Client, batcher.Options{})
	ids := oneEach(t, launch(t, api, 8, func(int) string { return "lt-a" }, noTags))
	critical := cloudprovider.WithPriority(context.Background(), cloudprovider.PriorityCritical)

	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			out, err := api.DescribeInstances(critical, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, ec2apitest.Loopback)
			if err != nil {
				t.Error(err)
				return
			}
			if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 || aws.ToString(out.Reservations[0].Instances[0].InstanceId) != id {
				t.Errorf("DescribeInstances(%s) = %+v", id, out.Reservations)
			}
		})
	}
	// An unknown id fails only its caller.
	wg.Go(func() {
		_, err := api.DescribeInstances(critical, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}}, ec2apitest.Loopback)
		if code := ec2api.Code(err); code != ec2api.CodeInstanceNotFound {
			t.Errorf("unknown id: %v, want %s", err, ec2api.CodeInstanceNotFound)
		}
	})
	wg.Wait()
	if n := e.Sim.Counts()["DescribeInstances"]; n > 2 {
		t.Errorf("simulator got %d DescribeInstances calls, want 2 (the merged call and its retry without the unknown id)", n)
	}

	for _, id := range ids {
		wg.Go(func() {
			out, err := api.TerminateInstances(critical, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}, ec2apitest.Loopback)
			if err != nil {
				t.Error(err)
				return
			}
			if len(out.TerminatingInstances) != 1 || aws.ToString(out.TerminatingInstances[0].InstanceId) != id {
				t.Errorf("TerminateInstances(%s) = %+v", id, out.TerminatingInstances)
			}
		})
	}
	// EC2 terminates nothing when one id is unknown: that caller alone
	// gets the error, the others' instances are terminated by a retry.
	wg.Go(func() {
		_, err := api.TerminateInstances(critical, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0fedcba9876543210"}}, ec2apitest.Loopback)
		if code := ec2api.Code(err); code != ec2api.CodeInstanceNotFound {
			t.Errorf("unknown id: %v, want %s", err, ec2api.CodeInstanceNotFound)
		}
	})
	wg.Wait()
	if n := e.Sim.Counts()["TerminateInstances"]; n > 2 {
		t.Errorf("simulator got %d TerminateInstances calls, want 2 (the merged call and its retry without the unknown id)", n)
	}
	for _, inst := range e.Sim.Instances() {
		if inst.State != "shutting-down" && inst.State != "terminated" {
			t.Errorf("%s is %s", inst.ID, inst.State)
		}
	}
}

// TestCallerLeavesBatch checks that a caller whose context ends gets its
// error while the others are served.
func TestCallerLeavesBatch(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(t, e, "lt-a")
	api := batcher.New(e.Client, batcher.Options{})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := api.DescribeInstances(gone, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}}, ec2apitest.Loopback); err != context.Canceled {
		t.Errorf("cancelled caller: %v", err)
	}
	oneEach(t, launch(t, api, 2, func(int) string { return "lt-a" }, noTags))
}
