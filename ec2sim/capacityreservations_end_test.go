package ec2sim

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	testingclock "k8s.io/utils/clock/testing"
)

// describeOne returns one instance as DescribeInstances shows it.
func (e *testEnv) describeOne(t *testing.T, id string) types.Instance {
	t.Helper()
	out, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Reservations[0].Instances[0]
}

// launchBlock launches one instance into Capacity Block block as
// Karpenter does (DefaultTargetCapacityType capacity-block) and returns
// its id, or "" and the error code of the pool that failed.
func (e *testEnv) launchBlock(t *testing.T, lt, instanceType string) (string, string) {
	t.Helper()
	out, err := e.ec2.CreateFleet(context.Background(), fleetInput(lt, types.DefaultTargetCapacityTypeCapacityBlock, 1, nil, ov(instanceType, "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) == 1 {
		return out.Instances[0].InstanceIds[0], ""
	}
	if len(out.Errors) == 0 {
		t.Fatalf("capacity-block launch: no instance and no error: %+v", out)
	}
	return "", aws.ToString(out.Errors[0].ErrorCode)
}

// TestCapacityBlockEndTerminatesInstances: 30 minutes before a Capacity
// Block's end EC2 terminates its instances (shutting-down, then
// terminated, state reason Server.ScheduledStop) and takes no more
// launches into it; the block is active until its end and expired from
// then on (EC2 User Guide, "Work with Capacity Blocks", "View Capacity
// Blocks").
func TestCapacityBlockEndTerminatesInstances(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second, ShuttingDownDelay: 2 * time.Second, TerminatedRetention: 24 * time.Hour})
	ami := env.al2023(t, "x86_64")
	end := t0.Add(2 * time.Hour)
	block := env.addCR(t, CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2,
		ReservationType: ReservationTypeCapacityBlock, EndDate: end})
	env.reservedLaunchTemplate(t, "block", ami, block, true)
	id, code := env.launchBlock(t, "block", "p5.48xlarge")
	if id == "" {
		t.Fatalf("launch into an active block: %s", code)
	}

	clk.SetTime(end.Add(-CapacityBlockTerminationLead - time.Second))
	if in := env.describeOne(t, id); in.State.Name != types.InstanceStateNameRunning {
		t.Fatalf("1 s before the termination lead: %s, want running", in.State.Name)
	}
	if got := env.describeCRs(t, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{block}})[block]; aws.ToInt32(got.AvailableInstanceCount) != 1 {
		t.Fatalf("available 1 s before the lead: %d, want 1", aws.ToInt32(got.AvailableInstanceCount))
	}

	clk.SetTime(end.Add(-CapacityBlockTerminationLead))
	in := env.describeOne(t, id)
	if in.State.Name != types.InstanceStateNameShuttingDown || in.StateReason == nil || aws.ToString(in.StateReason.Code) != stateReasonCapacityBlock {
		t.Fatalf("at the termination lead: %s %+v, want shutting-down with %s", in.State.Name, in.StateReason, stateReasonCapacityBlock)
	}
	got := env.describeCRs(t, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{block}})[block]
	if got.State != types.CapacityReservationStateActive || aws.ToInt32(got.AvailableInstanceCount) != 0 {
		t.Fatalf("block in its last 30 minutes: %s, %d available; want active with 0", got.State, aws.ToInt32(got.AvailableInstanceCount))
	}
	if _, code := env.launchBlock(t, "block", "p5.48xlarge"); code != "ReservationCapacityExceeded" {
		t.Fatalf("launch in the block's last 30 minutes: %q, want ReservationCapacityExceeded", code)
	}

	clk.Step(2 * time.Second)
	if in := env.describeOne(t, id); in.State.Name != types.InstanceStateNameTerminated {
		t.Fatalf("after the shutting-down delay: %s, want terminated", in.State.Name)
	}
	if st := env.sim.CapacityReservations()[0]; len(st.Instances) != 0 {
		t.Fatalf("block's instances after the terminations: %v", st.Instances)
	}

	clk.SetTime(end)
	expired := env.describeCRs(t, &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{{Name: aws.String("state"), Values: []string{"expired"}}}})
	if got, ok := expired[block]; !ok || aws.ToInt32(got.AvailableInstanceCount) != 0 {
		t.Fatalf("state=expired at the end: %v", expired)
	}
	active := env.describeCRs(t, &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{{Name: aws.String("state"), Values: []string{"active"}}}})
	if len(active) != 0 {
		t.Fatalf("state=active at the end: %v", active)
	}
}

// TestCapacityBlockTerminatedInstanceStaysTerminatedByUser: an instance
// terminated by its owner before the block's lead keeps its own end and
// state reason.
func TestCapacityBlockTerminatedInstanceStaysTerminatedByUser(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second, ShuttingDownDelay: 2 * time.Second, TerminatedRetention: 24 * time.Hour})
	ami := env.al2023(t, "x86_64")
	end := t0.Add(time.Hour)
	block := env.addCR(t, CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1,
		ReservationType: ReservationTypeCapacityBlock, EndDate: end})
	env.reservedLaunchTemplate(t, "block", ami, block, true)
	id, code := env.launchBlock(t, "block", "p5.48xlarge")
	if id == "" {
		t.Fatal(code)
	}
	clk.SetTime(end.Add(-40 * time.Minute))
	if _, err := env.ec2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(end.Add(-CapacityBlockTerminationLead))
	in := env.describeOne(t, id)
	if in.State.Name != types.InstanceStateNameTerminated || aws.ToString(in.StateReason.Code) != stateReasonUser {
		t.Fatalf("terminated by its owner before the lead: %s %s, want terminated with %s", in.State.Name, aws.ToString(in.StateReason.Code), stateReasonUser)
	}
}

// TestSetCapacityBlockTerminationLead: a shorter lead moves the
// terminations of launched instances too; a lead that is not positive is
// refused.
func TestSetCapacityBlockTerminationLead(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second, ShuttingDownDelay: 2 * time.Second})
	ami := env.al2023(t, "x86_64")
	end := t0.Add(time.Hour)
	block := env.addCR(t, CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2,
		ReservationType: ReservationTypeCapacityBlock, EndDate: end})
	env.reservedLaunchTemplate(t, "block", ami, block, true)
	before, _ := env.launchBlock(t, "block", "p5.48xlarge")
	if err := env.sim.SetCapacityBlockTerminationLead(0); err == nil {
		t.Fatal("lead 0 accepted")
	}
	if err := env.sim.SetCapacityBlockTerminationLead(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	after, _ := env.launchBlock(t, "block", "p5.48xlarge")
	if before == "" || after == "" {
		t.Fatalf("launches: %q %q", before, after)
	}
	clk.SetTime(end.Add(-CapacityBlockTerminationLead))
	if in := env.describeOne(t, before); in.State.Name != types.InstanceStateNameRunning {
		t.Fatalf("30 min before the end with a 90 s lead: %s, want running", in.State.Name)
	}
	clk.SetTime(end.Add(-90 * time.Second))
	for _, id := range []string{before, after} {
		if in := env.describeOne(t, id); in.State.Name != types.InstanceStateNameShuttingDown {
			t.Fatalf("%s 90 s before the end: %s, want shutting-down", id, in.State.Name)
		}
	}
}

// TestODCREndKeepsInstancesOnDemand: when an ODCR expires or is
// cancelled its instances keep running and lose their association with it
// (DescribeInstances shows no capacityReservationId; the launch template's
// preference stays), so that Karpenter reads them as on-demand.
func TestODCREndKeepsInstancesOnDemand(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second, ShuttingDownDelay: 2 * time.Second})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	launch := func(lt string) string {
		t.Helper()
		in := fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a"))
		out, err := env.ec2.CreateFleet(ctx, in)
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("launch into %s: %v %+v", lt, err, out)
		}
		return out.Instances[0].InstanceIds[0]
	}
	expiring := env.addCR(t, CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1,
		InstanceMatchCriteria: MatchCriteriaTargeted, EndDate: t0.Add(time.Hour)})
	cancelled := env.addCR(t, CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1,
		InstanceMatchCriteria: MatchCriteriaTargeted})
	env.reservedLaunchTemplate(t, "expiring", ami, expiring, false)
	env.reservedLaunchTemplate(t, "cancelled", ami, cancelled, false)
	ids := map[string]string{expiring: launch("expiring"), cancelled: launch("cancelled")}

	clk.SetTime(t0.Add(time.Hour - time.Second))
	if in := env.describeOne(t, ids[expiring]); aws.ToString(in.CapacityReservationId) != expiring {
		t.Fatalf("before the end: reservation %q, want %s", aws.ToString(in.CapacityReservationId), expiring)
	}
	if err := env.sim.CancelCapacityReservation(cancelled); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(t0.Add(time.Hour))
	for cr, id := range ids {
		in := env.describeOne(t, id)
		if in.State.Name != types.InstanceStateNameRunning || in.CapacityReservationId != nil ||
			in.CapacityReservationSpecification == nil || in.CapacityReservationSpecification.CapacityReservationPreference != types.CapacityReservationPreferenceCapacityReservationsOnly {
			t.Errorf("instance of ended %s: %s, reservation %q, spec %+v; want running without reservation", cr, in.State.Name,
				aws.ToString(in.CapacityReservationId), in.CapacityReservationSpecification)
		}
	}
	for _, snap := range env.sim.Instances() {
		if snap.CapacityReservationID != "" {
			t.Errorf("Instances(): %s still in %s", snap.ID, snap.CapacityReservationID)
		}
	}
	got := env.describeCRs(t, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{expiring, cancelled}})
	if got[expiring].State != types.CapacityReservationStateExpired || got[cancelled].State != types.CapacityReservationStateCancelled {
		t.Fatalf("states: %s %s, want expired and cancelled", got[expiring].State, got[cancelled].State)
	}
}
