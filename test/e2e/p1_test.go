package e2e

// Problem P1 on karpx. This file keeps karpx's side only: karpx has no
// switch to turn its protections off (issue 29). The control, the same
// scenario on the real Karpenter AWS provider against ec2sim, which shows
// the throttling and the SDK's retry-quota errors, lives in test/upstream
// (TestUpstreamAWSP1-style tests). The budget's own unit test keeps the
// failure mode in small: TestBurstStaysWithinAWSBuckets sends the same
// burst through a Limiter without buckets (autoscaler/aws/budget).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/problems"
)

// p1Scale compresses time in the P1 scenario: every duration of the
// autoscaler's own (registration TTL, backoffs, garbage collection; not
// the provisioning batch windows, see runP1) is divided by it, so
// p1Simulated (30 minutes) takes problems.P1Window (90 s) of real time.
// EC2's token buckets are not compressed: call rates are averaged over
// sliding 60-s windows of real time, each of which holds 20 simulated
// minutes of relaunch attempts, so the rate criterion is stricter than in
// a real cluster.
const (
	p1Scale     = 20
	p1Simulated = 30 * time.Minute
)

// The scenario's sizes are test/problems' (shared with the real
// Karpenter's run): problems.P1Neighbours of every EC2 bucket is used by
// the account's other clients, and problems.P1Storm pods go to the broken
// NodePool. An unprotected autoscaler launches them concurrently, one
// CreateFleet each: 150 against the 20 tokens the neighbours leave in
// EC2's mutating bucket made about 130 throttled answers in the first
// second and, through the SDK's retries, more than its 500-token retry
// quota, in every run of the former karpx control (with 50 pods it was
// throttled 32 times in 90 s and never ran out of retry quota).

// p1Manifests: a healthy pair and a pair whose userData makes instances
// run but never join (problems.P1NeverJoinUserData). problems.
// P1InstanceType only, so that every pod needs a node of its own.
func p1Manifests(cluster string) string {
	pool := func(tier string) string {
		return nodePool{Name: tier, Labels: map[string]string{"tier": tier},
			InstanceTypes: []string{problems.P1InstanceType}, CapacityTypes: []string{onDemand}}.yaml()
	}
	return manifests(nodeClass{Name: "healthy"}.yaml(cluster),
		nodeClass{Name: "broken", UserData: problems.P1NeverJoinUserData}.yaml(cluster),
		pool("healthy"), pool("broken"))
}

// p1Unknown is the refill rate assumed for counted actions the simulator
// does not know (its "Unknown" counter): the EC2 non-mutating 20/s.
const p1Unknown = 20

// p1Refill is each action's EC2 bucket refill rate in requests per second,
// from the simulator's own table (ec2sim.DefaultRefillRate: the bucket of
// the action's category in DefaultThrottleConfig, for the filtered Describe
// calls karpx makes), or p1Unknown for actions the simulator does not
// answer.
func p1Refill(action string) float64 {
	if r, ok := ec2sim.DefaultRefillRate(action); ok {
		return r
	}
	return p1Unknown
}

// quotaCounter counts log entries that report the SDK's retry quota error.
type quotaCounter struct {
	logr.LogSink
	n *atomic.Int64
}

func (q quotaCounter) Error(err error, msg string, kv ...any) {
	if err != nil && strings.Contains(err.Error(), problems.P1RetryQuotaMessage) {
		q.n.Add(1)
	}
	q.LogSink.Error(err, msg, kv...)
}

func (q quotaCounter) Info(level int, msg string, kv ...any) {
	if strings.Contains(fmt.Sprint(kv...), problems.P1RetryQuotaMessage) {
		q.n.Add(1)
	}
	q.LogSink.Info(level, msg, kv...)
}

func (q quotaCounter) WithValues(kv ...any) logr.LogSink {
	return quotaCounter{q.LogSink.WithValues(kv...), q.n}
}

func (q quotaCounter) WithName(name string) logr.LogSink {
	return quotaCounter{q.LogSink.WithName(name), q.n}
}

type p1Result struct {
	requests               int64 // karpx's calls answered by the simulator
	createFleet            int64 // karpx's CreateFleet calls
	terminateInstances     int64 // karpx's TerminateInstances calls
	throttled, quotaErrors int64
	worst                  map[string]float64 // action → worst window rate / refill
	healthyIntact          bool
	brokenLaunches         int64
}

// runP1 runs the retry-storm scenario on karpx and returns what it
// measured; it checks the NodePool's condition and event itself.
func runP1(t *testing.T) p1Result {
	var quota atomic.Int64
	scaled := func(d time.Duration) time.Duration { return d / p1Scale }
	e := newEnvWith(t, "karpx-p1", envOptions{sim: problems.P1Sim, tweak: func(o *operator.Options) {
		o.RegistrationTTL = scaled(15 * time.Minute)
		o.LaunchBackoffBase = scaled(30 * time.Second)
		o.LaunchBackoffMax = scaled(10 * time.Minute)
		o.GCPeriod = scaled(2 * time.Minute)
		o.GCGrace = scaled(5 * time.Minute)
		// The provisioning batch windows are not compressed: like EC2's
		// token buckets, they bound a rate of API calls per real second
		// (compressed to 50 ms / 500 ms, a 150-pod scale-up became about
		// 100 CreateFleet calls in a minute instead of a few).
		o.BatchIdleDuration = time.Second
		o.BatchMaxDuration = 10 * time.Second
	}, wrapLog: func(l logr.Logger) logr.Logger { return logr.New(quotaCounter{l.GetSink(), &quota}) }})

	e.apply(p1Manifests(e.name))
	steady := deployment("steady", problems.P1Healthy, problems.P1PodCPU, problems.P1PodMemory)
	steady.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "healthy"}
	if err := e.kube.Create(e.ctx, steady); err != nil {
		t.Fatal(err)
	}
	e.eventually(90*time.Second, "the healthy pods Running, one per node", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "steady") == problems.P1Healthy, nil
	})
	healthyBefore := healthySnapshot(t, e)

	storm := deployment("storm", problems.P1Storm, problems.P1PodCPU, problems.P1PodMemory)
	storm.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "broken"}
	if err := e.kube.Create(e.ctx, storm); err != nil {
		t.Fatal(err)
	}

	// Sample the simulator's counters every real second; rates are
	// averaged over every sliding 60-s window of real time, the EC2
	// buckets' own time base.
	var samples []map[string]int64
	// sample records every action's request count.
	sample := func() {
		m := map[string]int64{}
		for action, st := range e.sim.Stats() {
			m[action] = st.Requests
		}
		samples = append(samples, m)
	}
	sample()
	start := time.Now()
	for time.Since(start) < problems.P1Window {
		time.Sleep(time.Second)
		sample()
	}
	worst := map[string]float64{}
	const window = 60
	for i := window; i < len(samples); i++ {
		for action, n := range samples[i] {
			rate := float64(n-samples[i-window][action]) / window
			if r := rate / p1Refill(action); r > worst[action] {
				worst[action] = r
			}
		}
	}

	res := p1Result{worst: worst, quotaErrors: quota.Load()}
	for action, st := range e.sim.Stats() {
		res.requests += st.Requests
		res.throttled += st.Throttled
		switch action {
		case "CreateFleet":
			res.createFleet = st.Requests
		case "TerminateInstances":
			res.terminateInstances = st.Requests
		}
	}
	for _, in := range e.sim.Instances() {
		if in.Tags[karpv1.NodePoolLabelKey] == "broken" {
			res.brokenLaunches++
		}
	}
	res.healthyIntact = healthySnapshot(t, e) == healthyBefore
	var actions []string
	for a := range worst {
		actions = append(actions, a)
	}
	sort.Strings(actions)
	var rates []string
	for _, a := range actions {
		rates = append(rates, fmt.Sprintf("%s=%.0f%%", a, 100*worst[a]))
	}
	scenarioLogf(t, "scenario P1: neighbours=%.0f%% simulated=%s scale=%d elapsed=%s requests=%d createFleet=%d terminateInstances=%d throttled=%d (%.2f%%) sdkQuotaErrors=%d brokenLaunches=%d healthyIntact=%v worst60sRateVsRefill{%s}",
		100*problems.P1Neighbours, p1Simulated, p1Scale, time.Since(start).Round(time.Second), res.requests, res.createFleet, res.terminateInstances, res.throttled,
		100*float64(res.throttled)/float64(max(res.requests, 1)), res.quotaErrors, res.brokenLaunches, res.healthyIntact, strings.Join(rates, " "))

	var np karpv1.NodePool
	if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "broken"}, &np); err != nil {
		t.Fatal(err)
	}
	cond := np.StatusConditions().Get(karpv1.ConditionTypeNodeRegistrationHealthy)
	if cond == nil || cond.IsTrue() || !strings.Contains(cond.Message, "RegistrationTimeout") || !strings.Contains(cond.Message, "spec.userData") {
		t.Errorf("NodePool broken: NodeRegistrationHealthy = %+v, want False naming RegistrationTimeout and spec.userData", cond)
	}
	// Events are written by the recorder's broadcaster, behind every
	// pod's Nominated and FailedProvisioning events of the storm: on a
	// loaded machine the first ProvisioningPaused can reach the API server
	// well after the pause (missing at the storm's end once, in a parallel
	// run at load 31; the same test passed alone), so it gets a minute.
	paused := func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := e.kube.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == "NodePool" && ev.InvolvedObject.Name == "broken" && ev.Reason == "ProvisioningPaused" &&
				strings.Contains(ev.Message, "spec.userData") {
				return true, nil
			}
		}
		return false, nil
	}
	if err := wait.PollUntilContextTimeout(e.ctx, time.Second, time.Minute, true, paused); err != nil {
		t.Errorf("no ProvisioningPaused event on NodePool broken naming spec.userData within a minute: %v", err)
	}
	return res
}

// healthySnapshot identifies the healthy pods and their nodes; any
// deletion or replacement changes it.
func healthySnapshot(t *testing.T, e *env) string {
	var pods corev1.PodList
	if err := e.kube.List(e.ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "steady"}); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, p := range pods.Items {
		var node corev1.Node
		if err := e.kube.Get(e.ctx, types.NamespacedName{Name: p.Spec.NodeName}, &node); err != nil {
			parts = append(parts, "missing-node:"+p.Spec.NodeName)
			continue
		}
		parts = append(parts, string(p.UID)+"@"+string(node.UID)+":"+string(p.Status.Phase))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// TestScenarioP1RetryStorm: nodes of one NodePool never join, and the
// account's other clients use 60% of every EC2 bucket; karpx must stay far
// inside the EC2 API budget for 30 simulated minutes (every action but
// CreateFleet and TerminateInstances at most 25% of EC2's refill rate over
// any minute, no CreateFleet beyond one per NodeClaim of the first wave and
// no more TerminateInstances calls than broken instances), be throttled on at
// most 1% of its calls (its adaptive budget learns the share left from the
// first RequestLimitExceeded answers), never run out of SDK retry quota,
// keep the healthy nodes and pods, and say on the NodePool what is wrong
// and which field to fix.
func TestScenarioP1RetryStorm(t *testing.T) {
	runInParallel(t)
	res := runP1(t)
	if res.requests == 0 {
		t.Fatal("the simulator answered no calls")
	}
	if 100*res.throttled > res.requests {
		t.Errorf("simulator answered RequestLimitExceeded %d times for %d calls, want <= 1%%", res.throttled, res.requests)
	}
	if res.quotaErrors != 0 {
		t.Errorf("controller hit the SDK retry quota %d times", res.quotaErrors)
	}
	for action, r := range res.worst {
		// CreateFleet: the first wave of the storm is legitimate work
		// (one launch per pending pod's NodeClaim, paced by the
		// client-side budget at up to the share the neighbours leave);
		// what P1 forbids is relaunching, counted below.
		// TerminateInstances likewise: each broken instance must be
		// terminated once when its registration TTL ends, and how many
		// calls the batcher merges that wave into varies from run to run
		// (13-28% of refill in one series); what P1 forbids is terminating
		// again, counted below.
		if r > 0.25 && action != "CreateFleet" && action != "TerminateInstances" {
			t.Errorf("%s: worst 60-s window ran at %.0f%% of the bucket's refill rate, want <= 25%%", action, 100*r)
		}
	}
	if res.terminateInstances > res.brokenLaunches {
		t.Errorf("%d TerminateInstances calls for %d broken instances: terminations were repeated", res.terminateInstances, res.brokenLaunches)
	}
	if res.createFleet > problems.P1Storm+problems.P1Healthy {
		t.Errorf("%d CreateFleet calls for %d broken and %d healthy pods: launches that keep failing were retried instead of paused",
			res.createFleet, problems.P1Storm, problems.P1Healthy)
	}
	if !res.healthyIntact {
		t.Error("healthy nodes or pods were deleted or replaced")
	}
}
