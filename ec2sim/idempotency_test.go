package ec2sim

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestClientTokenIdempotency: a CreateFleet whose answer is lost is retried
// by the SDK with the same ClientToken and launches once; a later call with
// the same token and parameters gets the same instance; different
// parameters under the same token are IdempotentParameterMismatch.
func TestClientTokenIdempotency(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	env.launchTemplate(t, "idem", ami, "")
	running := func() int {
		n := 0
		for _, in := range env.sim.Instances() {
			if in.State == "pending" || in.State == "running" {
				n++
			}
		}
		return n
	}

	env.sim.LoseAnswers("CreateFleet", 1)
	in := fleetInput("idem", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", ""))
	in.ClientToken = aws.String("karpx-nodeclaim-0001")
	out, err := env.ec2Client(3).CreateFleet(ctx, in)
	if err != nil {
		t.Fatalf("the SDK's retry must get the launch's answer: %v", err)
	}
	if n := running(); n != 1 || len(out.Instances) != 1 {
		t.Fatalf("%d instances running, %d in the answer; want 1 and 1", n, len(out.Instances))
	}
	again, err := env.ec2.CreateFleet(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if running() != 1 || again.Instances[0].InstanceIds[0] != out.Instances[0].InstanceIds[0] || aws.ToString(again.FleetId) != aws.ToString(out.FleetId) {
		t.Errorf("same token: %d instances, answer %v; want the first answer again", running(), again.Instances)
	}
	if env.sim.IdempotentReplays() != 2 {
		t.Errorf("%d replays, want 2 (the SDK's retry and the second call)", env.sim.IdempotentReplays())
	}
	other := fleetInput("idem", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.xlarge", ""))
	other.ClientToken = in.ClientToken
	_, err = env.ec2.CreateFleet(ctx, other)
	apiErr(t, err, "IdempotentParameterMismatch", 400)

	long := fleetInput("idem", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", ""))
	long.ClientToken = aws.String(strings.Repeat("x", maxClientToken+1))
	_, err = env.ec2.CreateFleet(ctx, long)
	apiErr(t, err, "InvalidParameterValue", 400)

	// Without a lost answer or a token, every call launches.
	if _, err := env.ec2.CreateFleet(ctx, fleetInput("idem", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", ""))); err != nil {
		t.Fatal(err)
	}
	if running() != 2 {
		t.Errorf("%d instances, want 2", running())
	}
}
