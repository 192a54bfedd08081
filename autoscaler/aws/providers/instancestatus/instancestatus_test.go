package instancestatus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancestatus"
	"github.com/karpx/karpx/ec2sim"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// launch starts n on-demand m5.large instances in the simulator and
// returns their ids once they run (the fake clock stepped past the
// pending delay).
func launch(t *testing.T, e *ec2apitest.Env, clk *testingclock.FakeClock, n int32) []string {
	t.Helper()
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
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != int(n) {
		t.Fatalf("CreateFleet: %+v, errors %+v", out.Instances, out.Errors)
	}
	clk.Step(time.Second)
	return out.Instances[0].InstanceIds
}

// TestListAndDue runs the provider against the EC2 simulator: an instance
// check failure, a system check failure and a scheduled retirement are
// listed (one each, a healthy neighbour not), in three
// DescribeInstanceStatus calls; the checks are due exactly 2 minutes after
// their impairedSince, the event at once.
func TestListAndDue(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	e := ec2apitest.Start(t, ec2sim.Config{Clock: clk, PendingDelay: time.Second}, ec2api.Config{})
	ids := launch(t, e, clk, 4)
	p := instancestatus.New(e.Client, clk)
	ctx := context.Background()

	got, err := p.List(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("healthy instances: %+v, %v", got, err)
	}
	failedAt := clk.Now()
	if err := e.Sim.FailStatusChecks(ec2sim.StatusCheckFault{InstanceIDs: ids[:1], Instance: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sim.FailStatusChecks(ec2sim.StatusCheckFault{InstanceIDs: ids[1:2], System: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sim.Interrupt(ec2sim.InterruptionRetirement, ids[2]); err != nil {
		t.Fatal(err)
	}
	before := e.Sim.Counts()["DescribeInstanceStatus"]
	clk.Step(instancestatus.UnhealthyThreshold - time.Second)
	got, err = p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if calls := e.Sim.Counts()["DescribeInstanceStatus"] - before; calls != 3 {
		t.Errorf("%d DescribeInstanceStatus calls per List, want 3 (one per filter set)", calls)
	}
	byID := map[string]instancestatus.HealthStatus{}
	for _, h := range got {
		byID[h.InstanceID] = h
	}
	if len(got) != 3 || len(byID) != 3 {
		t.Fatalf("listed %+v, want instances %v once each", got, ids[:3])
	}
	want := map[string]instancestatus.Category{ids[0]: instancestatus.InstanceStatus, ids[1]: instancestatus.SystemStatus, ids[2]: instancestatus.EventStatus}
	for id, cat := range want {
		h := byID[id]
		if len(h.Details) != 1 || h.Details[0].Category != cat {
			t.Errorf("%s: details %+v, want one %s", id, h.Details, cat)
		}
	}
	if d := byID[ids[0]].Details[0]; d.Name != "reachability" || !d.ImpairedSince.Equal(failedAt) {
		t.Errorf("instance check detail %+v, want reachability impaired since %s", d, failedAt)
	}
	if d := byID[ids[2]].Details[0]; d.Name != "instance-retirement" || !d.ImpairedSince.Equal(clk.Now()) {
		t.Errorf("event detail %+v, want instance-retirement seen now", d)
	}
	now := clk.Now()
	for _, id := range ids[:2] {
		if due, ok := instancestatus.Due(byID[id], now); ok {
			t.Errorf("%s due 1 s before the 2-minute toleration: %+v", id, due)
		}
		if at := instancestatus.DueAt(byID[id]); !at.Equal(failedAt.Add(instancestatus.UnhealthyThreshold)) {
			t.Errorf("%s due at %s, want %s", id, at, failedAt.Add(instancestatus.UnhealthyThreshold))
		}
	}
	if due, ok := instancestatus.Due(byID[ids[2]], now); !ok || due.Categories()[0] != instancestatus.EventStatus {
		t.Errorf("scheduled event not due at once: %+v %v", due, ok)
	}
	clk.Step(time.Second)
	for _, id := range ids[:2] {
		due, ok := instancestatus.Due(byID[id], clk.Now())
		if !ok || !due.ImpairedSince.Equal(failedAt) {
			t.Errorf("%s not due at the 2-minute toleration: %+v %v", id, due, ok)
		}
	}
}

// TestDueKeepsOnlyWhatIsDue: of an instance failing both checks, one
// since 3 minutes and one since 30 s, only the first is due, and the
// status's ImpairedSince is the earliest due detail's.
func TestDueKeepsOnlyWhatIsDue(t *testing.T) {
	h := instancestatus.HealthStatus{InstanceID: "i-1", ImpairedSince: t0.Add(-3 * time.Minute), Details: []instancestatus.Detail{
		{Category: instancestatus.SystemStatus, Name: "reachability", ImpairedSince: t0.Add(-30 * time.Second)},
		{Category: instancestatus.InstanceStatus, Name: "reachability", ImpairedSince: t0.Add(-3 * time.Minute)},
	}}
	due, ok := instancestatus.Due(h, t0)
	if !ok || len(due.Details) != 1 || due.Details[0].Category != instancestatus.InstanceStatus || !due.ImpairedSince.Equal(t0.Add(-3*time.Minute)) {
		t.Fatalf("due %+v %v", due, ok)
	}
	if got := h.Categories(); len(got) != 2 || got[0] != instancestatus.SystemStatus {
		t.Errorf("categories %v", got)
	}
	if at := instancestatus.DueAt(h); !at.Equal(t0.Add(-time.Minute)) {
		t.Errorf("due at %s, want %s", at, t0.Add(-time.Minute))
	}
}

// TestListReturnsEC2sError: an UnauthorizedOperation answer comes back
// with its code readable by ec2api.Code, and no statuses.
func TestListReturnsEC2sError(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	e := ec2apitest.Start(t, ec2sim.Config{Clock: clk, PendingDelay: time.Second}, ec2api.Config{RetryMaxAttempts: 1})
	if err := e.Sim.Faults().FailNext("DescribeInstanceStatus", "UnauthorizedOperation", 1); err != nil {
		t.Fatal(err)
	}
	got, err := instancestatus.New(e.Client, clk).List(context.Background())
	if err == nil || ec2api.Code(err) != "UnauthorizedOperation" || got != nil {
		t.Fatalf("List: %+v, %v; want UnauthorizedOperation", got, err)
	}
	var nf interface{ ErrorCode() string }
	if !errors.As(err, &nf) {
		t.Errorf("error %v does not wrap the API error", err)
	}
}
