package batcher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/middleware"

	"github.com/karpx/karpx/autoscaler/aws/batcher"
	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/ec2sim"
)

// BenchmarkScaleUp launches nodes NodeClaims at once through batcher and
// budget (default fraction) against the simulator with AWS's buckets, as
// karpx's launch path does: a Critical CreateFleet of one instance per
// NodeClaim, then a Critical DescribeInstances of its instance
// (registration). It reports the EC2 calls per launched node, the
// throttled answers, and the client-side wait. ns/op is the launches'
// time: with per-NodeClaim tags, the deferred CreateTags calls go on after
// it (their budget wait shows in wait-p99-s) and are counted once done.
//
//	go test -run '^$' -bench ScaleUp -benchtime 1x ./autoscaler/aws/batcher/
func BenchmarkScaleUp(b *testing.B) {
	for _, bc := range []struct {
		nodes    int
		deferred bool
	}{{1000, false}, {100, true}} {
		name := fmt.Sprintf("nodes=%d", bc.nodes)
		if bc.deferred {
			name += "/per-nodeclaim-tags"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				scaleUp(b, bc.nodes, bc.deferred)
			}
		})
	}
}

func scaleUp(b *testing.B, nodes int, deferred bool) {
	b.StopTimer()
	e := ec2apitest.Start(b, ec2sim.Config{}, ec2api.Config{})
	launchTemplate(b, e, "lt-a")
	e.Sim.Faults().Clear()
	limiter := budget.New(budget.Options{})
	limited := e.NewClient(b, ec2api.Config{APIOptions: []func(*middleware.Stack) error{limiter.AddToStack}})
	opts := batcher.Options{}
	if deferred {
		opts.DeferredTagKeys = instance.NodeClaimTagKeys
	}
	api := batcher.New(limited, opts)
	ctx := cloudprovider.WithPriority(context.Background(), cloudprovider.PriorityCritical)
	before := e.Sim.Stats()
	b.StartTimer()

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		launched int
		failures int
	)
	for i := range nodes {
		wg.Go(func() {
			var tags map[string]string
			if deferred {
				tags = map[string]string{"karpenter.sh/nodeclaim": fmt.Sprintf("nc-%d", i), "Name": fmt.Sprintf("nc-%d", i)}
			}
			out, err := api.CreateFleet(ctx, fleet("lt-a", tags), ec2apitest.Loopback)
			if err != nil || len(out.Instances) != 1 {
				mu.Lock()
				failures++
				mu.Unlock()
				return
			}
			d, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds}, ec2apitest.Loopback)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(d.Reservations) != 1 {
				failures++
				return
			}
			launched++
		})
	}
	wg.Wait()
	b.StopTimer()
	// The deferred tags land after the launches; count them all.
	if err := api.WaitTagged(context.Background()); err != nil {
		b.Fatal(err)
	}

	if failures > 0 || launched != nodes {
		b.Fatalf("%d of %d nodes launched, %d failures", launched, nodes, failures)
	}
	after := e.Sim.Stats()
	calls := func(action string) float64 { return float64(after[action].Requests - before[action].Requests) }
	var throttled int64
	for a, st := range after {
		throttled += st.Throttled - before[a].Throttled
	}
	st := limiter.Snapshot()
	maxP99 := 0.0
	for _, c := range st.Categories {
		maxP99 = max(maxP99, c.WaitP99Seconds)
	}
	b.ReportMetric(calls("CreateFleet")/float64(nodes), "CreateFleet/node")
	b.ReportMetric(calls("DescribeInstances")/float64(nodes), "DescribeInstances/node")
	b.ReportMetric(calls("CreateTags")/float64(nodes), "CreateTags/node")
	b.ReportMetric(float64(throttled), "throttled")
	b.ReportMetric(float64(st.Totals.QuotaErrors), "quota-errors")
	b.ReportMetric(maxP99, "wait-p99-s")
}
