package instancestatus_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/aws/controllers/instancestatus"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	awsinstancestatus "github.com/karpx/karpx/autoscaler/aws/providers/instancestatus"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	_ "github.com/karpx/karpx/autoscaler/karpentermetrics" // registers karpenter_nodeclaims_disrupted_total
	"github.com/karpx/karpx/ec2sim"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// env is the EC2 simulator with n running instances, a NodeClaim and a
// Node for each of the first claimed ones, and a Controller polling the
// simulator through the real provider, all on one fake clock.
type env struct {
	clk      *testingclock.FakeClock
	sim      *ec2sim.Simulator
	kube     client.Client
	recorder *record.FakeRecorder
	c        *instancestatus.Controller
	client   *ec2api.Client
	api      *priorities
	ids      []string
}

// priorities records the cloudprovider.Priority of each
// DescribeInstanceStatus call.
type priorities struct {
	ec2api.EC2API
	seen []cloudprovider.Priority
}

func (p *priorities) DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	p.seen = append(p.seen, cloudprovider.PriorityFrom(ctx))
	return p.EC2API.DescribeInstanceStatus(ctx, in, opts...)
}

func newEnv(t *testing.T, n int32, claimed int) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	e := ec2apitest.Start(t, ec2sim.Config{Clock: clk, PendingDelay: time.Second}, ec2api.Config{RetryMaxAttempts: 1})
	ctx := context.Background()
	p, err := e.Client.GetParameter(ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("nodes"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: p.Parameter.Value}}); err != nil {
		t.Fatal(err)
	}
	out, err := e.Client.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("nodes"), Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, AvailabilityZone: aws.String("us-east-1a")}}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(n),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand}})
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("CreateFleet: %+v %v", out, err)
	}
	clk.Step(time.Second)
	ids := out.Instances[0].InstanceIds
	var objs []client.Object
	for i, id := range ids[:claimed] {
		name := "pool-" + string(rune('a'+i))
		objs = append(objs, &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer},
				Labels: map[string]string{karpv1.NodePoolLabelKey: "pool", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}},
			Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + id, NodeName: "node-" + name}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id}})
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	rec := record.NewFakeRecorder(100)
	api := &priorities{EC2API: e.Client}
	c := instancestatus.New(kube, awsinstancestatus.New(api, clk), rec, clk, instancestatus.Options{})
	return &env{api: api, client: e.Client, clk: clk, sim: e.Sim, kube: kube, recorder: rec, c: c, ids: ids}
}

func (e *env) claim(t *testing.T, name string) *karpv1.NodeClaim {
	t.Helper()
	var nc karpv1.NodeClaim
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: name}, &nc); err != nil {
		t.Fatal(err)
	}
	return &nc
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// disrupted reads karpenter_nodeclaims_disrupted_total{reason=kind,
// nodepool=pool,capacity_type=on-demand} from the controller-runtime
// registry (0 before its first count).
func disrupted(t *testing.T, kind string) float64 {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "karpenter_nodeclaims_disrupted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] == kind && labels["nodepool"] == "pool" && labels["capacity_type"] == karpv1.CapacityTypeOnDemand {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestPollReplacesAnImpairedInstanceAfterTheToleration: pool-a's instance
// check fails; at 1 s short of 2 minutes nothing happens (the report says
// when it will), at 2 minutes pool-a is annotated with the termination
// timestamp and deleted, with Karpenter's events and metrics; pool-b
// (healthy) and an impaired instance of no NodeClaim are left; a second
// poll acts and counts nothing again.
func TestPollReplacesAnImpairedInstanceAfterTheToleration(t *testing.T) {
	e := newEnv(t, 3, 2)
	ctx := context.Background()
	failedAt := e.clk.Now()
	if err := e.sim.FailStatusChecks(ec2sim.StatusCheckFault{InstanceIDs: []string{e.ids[0], e.ids[2]}, Instance: true}); err != nil {
		t.Fatal(err)
	}
	disruptedBefore := disrupted(t, instancestatus.KindInstanceStatus)
	e.clk.Step(awsinstancestatus.UnhealthyThreshold - time.Second)
	if err := e.c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if nc := e.claim(t, "pool-a"); !nc.DeletionTimestamp.IsZero() || len(e.events()) != 0 {
		t.Fatalf("acted 1 s before the toleration: %+v", nc.ObjectMeta)
	}
	rep := e.c.Report()
	if len(rep.Instances) != 1 || rep.Instances[0].NodeClaim != "pool-a" || rep.Instances[0].Node != "node-pool-a" || rep.Instances[0].NodePool != "pool" ||
		rep.Instances[0].Acted || !rep.Instances[0].DueAt.Equal(failedAt.Add(awsinstancestatus.UnhealthyThreshold)) {
		t.Fatalf("report %+v", rep)
	}

	unhealthyBefore := testutil.ToFloat64(instancestatus.InstanceStatusUnhealthy("InstanceStatus"))
	e.clk.Step(time.Second)
	if err := e.c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	nc := e.claim(t, "pool-a")
	if nc.DeletionTimestamp.IsZero() || nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] != e.clk.Now().Format(time.RFC3339) {
		t.Fatalf("pool-a not deleted forcefully at the toleration: %+v", nc.ObjectMeta)
	}
	if b := e.claim(t, "pool-b"); !b.DeletionTimestamp.IsZero() {
		t.Errorf("healthy pool-b deleted")
	}
	for _, p := range e.api.seen {
		if p != cloudprovider.PrioritySpeculative {
			t.Errorf("DescribeInstanceStatus at priority %s, want speculative (never into the budget's reserve)", p)
		}
	}
	evs := e.events()
	if len(evs) != 4 || !strings.HasPrefix(evs[0], "Warning InstanceUnhealthy ") || !strings.HasPrefix(evs[2], "Warning TerminatingOnInterruption ") {
		t.Errorf("events %q, want InstanceUnhealthy and TerminatingOnInterruption on the NodeClaim and its Node", evs)
	}
	if got := disrupted(t, instancestatus.KindInstanceStatus) - disruptedBefore; got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=instance_status} +%v, want +1", got)
	}
	if got := testutil.ToFloat64(instancestatus.InstanceStatusUnhealthy("InstanceStatus")) - unhealthyBefore; got != 1 {
		t.Errorf("karpenter_interruption_instance_status_unhealthy_total{category=InstanceStatus} +%v, want +1", got)
	}
	if rep := e.c.Report(); len(rep.Instances) != 1 || !rep.Instances[0].Acted {
		t.Errorf("report after the repair %+v", rep)
	}

	e.clk.Step(instancestatus.Interval)
	if err := e.c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := e.events(); len(evs) != 0 || disrupted(t, instancestatus.KindInstanceStatus)-disruptedBefore != 1 ||
		testutil.ToFloat64(instancestatus.InstanceStatusUnhealthy("InstanceStatus"))-unhealthyBefore != 1 {
		t.Errorf("second poll acted again: events %q", evs)
	}
}

// TestPollDrainsOnAScheduledEvent: a scheduled retirement deletes the
// NodeClaim at once without the termination timestamp (a graceful
// drain), unless the interruption queue's controller marked it already;
// a recovered-and-failed-again instance is counted again.
func TestPollDrainsOnAScheduledEvent(t *testing.T) {
	e := newEnv(t, 2, 2)
	ctx := context.Background()
	b := e.claim(t, "pool-b")
	metav1.SetMetaDataAnnotation(&b.ObjectMeta, cloudprovider.InterruptionAnnotationKey, "scheduled_change")
	if err := e.kube.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Interrupt(ec2sim.InterruptionRetirement, e.ids...); err != nil {
		t.Fatal(err)
	}
	before := disrupted(t, instancestatus.KindEventStatus)
	if err := e.c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	a := e.claim(t, "pool-a")
	if a.DeletionTimestamp.IsZero() {
		t.Fatal("pool-a not deleted on its scheduled retirement")
	}
	if _, ok := a.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		t.Errorf("scheduled event drained forcefully: %v", a.Annotations)
	}
	if b := e.claim(t, "pool-b"); !b.DeletionTimestamp.IsZero() {
		t.Errorf("pool-b, already handled by the interruption queue, deleted")
	}
	if got := disrupted(t, instancestatus.KindEventStatus) - before; got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=event_status} +%v, want +1", got)
	}
}

// TestStartStopsOnUnauthorizedAndWaitsAfterErrors: an UnauthorizedOperation
// stops polling after one call; any other error makes the next poll wait
// the full Interval (no retry storm).
func TestStartStopsOnUnauthorizedAndWaitsAfterErrors(t *testing.T) {
	e := newEnv(t, 1, 1)
	if err := e.sim.Faults().FailNext("DescribeInstanceStatus", "UnauthorizedOperation", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Poll(context.Background()); !errors.Is(err, instancestatus.ErrUnauthorized) {
		t.Fatalf("Poll: %v, want ErrUnauthorized", err)
	}
	if err := e.sim.Faults().FailNext("DescribeInstanceStatus", "UnauthorizedOperation", 1); err != nil {
		t.Fatal(err)
	}
	calls := func() int64 { return e.sim.Counts()["DescribeInstanceStatus"] }
	before := calls()
	if err := e.c.Start(context.Background()); err != nil { // returns: polling stopped
		t.Fatal(err)
	}
	if got := calls() - before; got != 1 {
		t.Errorf("%d calls before stopping on UnauthorizedOperation, want 1", got)
	}
	if rep := e.c.Report(); !strings.Contains(rep.Error, "UnauthorizedOperation") {
		t.Errorf("report error %q", rep.Error)
	}

	if err := e.sim.Faults().FailNext("DescribeInstanceStatus", "InternalError", 1); err != nil {
		t.Fatal(err)
	}
	// The simulator has timers of its own on e.clk: the polling Controller
	// gets a clock of its own, so that its waiting is observable.
	pollClock := testingclock.NewFakeClock(e.clk.Now())
	c := instancestatus.New(e.kube, awsinstancestatus.New(e.client, e.clk), e.recorder, pollClock, instancestatus.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	before = calls()
	go func() { done <- c.Start(ctx) }()
	waitForWaiter(t, pollClock)
	if got := calls() - before; got != 1 {
		t.Errorf("%d calls after a failed poll, want 1 (then a wait)", got)
	}
	pollClock.Step(instancestatus.Interval - time.Second)
	if got := calls() - before; got != 1 {
		t.Errorf("%d calls before the interval ran out, want 1", got)
	}
	pollClock.Step(time.Second) // fires the wait: one poll, then a new wait
	waitForWaiter(t, pollClock)
	if got := calls() - before; got != 4 {
		t.Errorf("%d calls after the interval, want 1 + 3 (one poll)", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// waitForWaiter returns once the Controller waits on clk (bounded: the
// simulator answers on loopback).
func waitForWaiter(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the controller never waited for its next poll")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHandlerServesTheReport: GET returns the last poll as JSON; other
// methods are refused.
func TestHandlerServesTheReport(t *testing.T) {
	e := newEnv(t, 1, 1)
	if err := e.c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	e.c.Handler().ServeHTTP(rr, httptest.NewRequest("GET", awsinstancestatus.HandlerPath, nil))
	if rr.Code != 200 || !strings.Contains(rr.Body.String(), `"instances":[]`) || !strings.Contains(rr.Body.String(), t0.Add(time.Second).Format(time.RFC3339)) {
		t.Errorf("GET: %d %s", rr.Code, rr.Body)
	}
	rr = httptest.NewRecorder()
	e.c.Handler().ServeHTTP(rr, httptest.NewRequest("POST", awsinstancestatus.HandlerPath, nil))
	if rr.Code != 405 {
		t.Errorf("POST: %d", rr.Code)
	}
}
