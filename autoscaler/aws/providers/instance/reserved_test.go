package instance

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/go-logr/logr"

	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancetype"
	"github.com/karpx/karpx/autoscaler/aws/providers/launchtemplate"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/ec2sim"
)

// tracker records what Launch reports about reservations.
type tracker struct {
	launched, unavailable []string
}

func (t *tracker) MarkLaunched(id string)        { t.launched = append(t.launched, id) }
func (t *tracker) MarkUnavailable(ids ...string) { t.unavailable = append(t.unavailable, ids...) }

func TestFleetInputReserved(t *testing.T) {
	req := request(cloudprovider.CapacityTypeReserved)
	req.ReservationType = "default"
	in := fleetInput(req)
	if in.TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeOnDemand || in.OnDemandOptions == nil || in.SpotOptions != nil {
		t.Errorf("ODCR launch: %+v", in.TargetCapacitySpecification)
	}
	req.ReservationType = "capacity-block"
	in = fleetInput(req)
	if in.TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeCapacityBlock || in.OnDemandOptions != nil || in.SpotOptions != nil {
		t.Errorf("capacity-block launch: %+v %+v", in.TargetCapacitySpecification, in.OnDemandOptions)
	}
}

// TestLaunchIntoReservation launches through ec2sim into a targeted ODCR
// of two places, as Karpenter's reserved launches do: two launches land in
// it, report MarkLaunched and read back as reserved; the third gets
// ReservationCapacityExceeded, which marks the reservation and the
// (type, zone, reserved) offering unavailable and is an
// InsufficientCapacityError (so the NodeClaim falls back, no retry storm).
func TestLaunchIntoReservation(t *testing.T) {
	env := ec2apitest.Start(t, ec2sim.Config{ClusterName: "demo", Throttle: ec2sim.ThrottleConfig{Disabled: true}}, ec2api.Config{RetryMaxAttempts: 1})
	ctx := context.Background()
	cr, err := env.Sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted})
	if err != nil {
		t.Fatal(err)
	}
	param, err := env.Client.GetParameter(ctx, &ssm.GetParameterInput{Name: new("/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	ami := *param.Parameter.Value
	lts := launchtemplate.NewProvider(env.Client, "demo", logr.Discard(), cache.NoCaching())
	name, err := lts.Ensure(ctx, launchtemplate.Template{ImageID: ami, CapacityReservationID: cr})
	if err != nil {
		t.Fatal(err)
	}
	subnets, err := env.Client.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var subnetA string
	for _, s := range subnets.Subnets {
		if *s.AvailabilityZone == "us-east-1a" {
			subnetA = *s.SubnetId
		}
	}
	unavailable := instancetype.NewUnavailableOfferings()
	p := NewProvider(env.Client, "demo", unavailable)
	tr := &tracker{}
	req := LaunchRequest{NodeClaimName: "nc", CapacityType: cloudprovider.CapacityTypeReserved, ReservationType: "default", Reservations: tr,
		Configs: []LaunchConfig{{LaunchTemplateName: name, ImageID: ami, Overrides: []Override{{InstanceType: "m5.large", SubnetID: subnetA, Zone: "us-east-1a", ReservationID: cr}}}},
		Tags:    map[string]string{"karpenter.sh/nodeclaim": "nc"}}
	for i := range 2 {
		inst, err := p.Launch(ctx, req)
		if err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
		if inst.CapacityType != cloudprovider.CapacityTypeReserved || inst.ReservationID != cr || inst.ReservationType != "default" {
			t.Fatalf("launch %d: %+v", i, inst)
		}
		got, err := p.Get(ctx, inst.ID)
		if err != nil || got.CapacityType != cloudprovider.CapacityTypeReserved || got.ReservationID != cr || got.ReservationType != "default" {
			t.Fatalf("read back: %v %+v", err, got)
		}
	}
	if len(tr.launched) != 2 || tr.launched[0] != cr {
		t.Fatalf("MarkLaunched: %v", tr.launched)
	}
	_, err = p.Launch(ctx, req)
	var ice *cloudprovider.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("launch into a full reservation: %v, want an InsufficientCapacityError", err)
	}
	if len(tr.unavailable) != 1 || tr.unavailable[0] != cr || !unavailable.IsUnavailable("m5.large", "us-east-1a", cloudprovider.CapacityTypeReserved) ||
		unavailable.IsUnavailable("m5.large", "us-east-1a", cloudprovider.CapacityTypeOnDemand) {
		t.Fatalf("after ReservationCapacityExceeded: tracker %v, reserved unavailable %v, on-demand unavailable %v", tr.unavailable,
			unavailable.IsUnavailable("m5.large", "us-east-1a", cloudprovider.CapacityTypeReserved),
			unavailable.IsUnavailable("m5.large", "us-east-1a", cloudprovider.CapacityTypeOnDemand))
	}
}
