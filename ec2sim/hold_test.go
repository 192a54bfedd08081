package ec2sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestHoldAnswers: a held CreateFleet has launched before its answer is
// released, is announced with its instance and caller, and the caller gets
// the answer only after ReleaseHeld; Calls records it with its
// User-Agent's app id.
func TestHoldAnswers(t *testing.T) {
	env := newTestEnv(t, Config{})
	ami := env.al2023(t, "x86_64")
	env.launchTemplate(t, "hold", ami, "")
	env.sim.HoldAnswers("CreateFleet", 1)
	client := env.ec2Client(1, func(o *ec2.Options) { o.AppID = "replica-a" })
	type answer struct {
		out *ec2.CreateFleetOutput
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := client.CreateFleet(context.Background(), fleetInput("hold", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
		done <- answer{out, err}
	}()
	var held HeldCall
	select {
	case held = <-env.sim.Held():
	case <-time.After(10 * time.Second):
		t.Fatal("no held CreateFleet announced")
	}
	if len(held.InstanceIDs) != 1 || !strings.Contains(held.UserAgent, "app/replica-a") {
		t.Fatalf("held call %+v: want one instance and the caller's app id", held)
	}
	if in := env.sim.Instances(); len(in) != 1 || in[0].ID != held.InstanceIDs[0] {
		t.Fatalf("instances %+v: the held call must have launched %s", in, held.InstanceIDs[0])
	}
	select {
	case a := <-done:
		t.Fatalf("answered before ReleaseHeld: %+v", a)
	case <-time.After(200 * time.Millisecond):
	}
	env.sim.ReleaseHeld()
	a := <-done
	if a.err != nil || aws.ToString(&a.out.Instances[0].InstanceIds[0]) != held.InstanceIDs[0] {
		t.Fatalf("released answer %+v, %v", a.out, a.err)
	}
	// Only n answers are held.
	if _, err := client.CreateFleet(context.Background(), fleetInput("hold", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", ""))); err != nil {
		t.Fatal(err)
	}
	calls := env.sim.Calls("CreateFleet")
	if len(calls) != 2 || !strings.Contains(calls[0].UserAgent, "app/replica-a") || calls[0].End.Sub(calls[0].Start) < 200*time.Millisecond {
		t.Errorf("calls %+v: want 2, the first held at least 200ms", calls)
	}
}
