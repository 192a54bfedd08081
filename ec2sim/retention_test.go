package ec2sim

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	testingclock "k8s.io/utils/clock/testing"
)

// TestTerminatedInstancesStayVisibleAnHour: by default a terminated
// instance stays in DescribeInstances, by ID and in an unfiltered
// listing, in state terminated for about an hour after it terminated, as
// the EC2 API Reference (TerminateInstances) says; a batched
// DescribeInstances naming it with a running instance lists both. After
// the hour it is gone and naming it fails with InvalidInstanceID.NotFound.
func TestTerminatedInstancesStayVisibleAnHour(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk})
	if got := env.sim.Config().TerminatedRetention; got != time.Hour {
		t.Fatalf("default TerminatedRetention = %s, want 1h (EC2's)", got)
	}
	ctx := context.Background()
	env.launchTemplate(t, "karpx-default", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(ctx, fleetInput("karpx-default", types.DefaultTargetCapacityTypeOnDemand, 2, nil, ov("m5.large", "us-east-1a")))
	if err != nil || len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 2 {
		t.Fatalf("CreateFleet: %v %+v", err, out)
	}
	ids := out.Instances[0].InstanceIds
	clk.Step(time.Second)
	if _, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	states := func() map[string]types.InstanceStateName {
		t.Helper()
		got, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		if err != nil {
			t.Fatalf("DescribeInstances of both: %v", err)
		}
		m := map[string]types.InstanceStateName{}
		for _, r := range got.Reservations {
			for _, in := range r.Instances {
				m[*in.InstanceId] = in.State.Name
			}
		}
		return m
	}
	shutDown := env.sim.Config().ShuttingDownDelay
	clk.Step(shutDown + 59*time.Minute)
	if got := states(); got[ids[0]] != types.InstanceStateNameTerminated || got[ids[1]] != types.InstanceStateNameRunning {
		t.Fatalf("59 minutes after termination: states %v, want %s terminated and %s running", got, ids[0], ids[1])
	}
	if n := len(env.sim.Instances()); n != 2 {
		t.Errorf("59 minutes after termination the simulator lists %d instances, want 2", n)
	}
	clk.Step(time.Minute + time.Second)
	_, err = env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	apiErr(t, err, "InvalidInstanceID.NotFound", 400)
	if snap := env.sim.Instances(); len(snap) != 1 || snap[0].ID != ids[1] {
		t.Errorf("an hour after termination the simulator lists %+v, want only %s", snap, ids[1])
	}
}
