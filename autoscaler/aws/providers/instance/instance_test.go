package instance

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancetype"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

type fakeAPI struct {
	ec2api.API
	in  *ec2.CreateFleetInput
	out *ec2.CreateFleetOutput
}

func (f *fakeAPI) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	f.in = in
	return f.out, nil
}

func request(ct string) LaunchRequest {
	return LaunchRequest{
		NodeClaimName: "nc", CapacityType: ct,
		Configs: []LaunchConfig{
			{LaunchTemplateName: "karpx/demo/std", ImageID: "ami-std", Overrides: []Override{{"m5.large", "subnet-a", "us-east-1a", ""}, {"m5.large", "subnet-b", "us-east-1b", ""}}},
			{LaunchTemplateName: "karpx/demo/gpu", ImageID: "ami-gpu", Overrides: []Override{{"g5.xlarge", "subnet-a", "us-east-1a", ""}}},
		},
		Tags: map[string]string{"karpenter.sh/nodeclaim": "nc", "Name": "nc"},
	}
}

func fleetErr(code, typ, subnet string) ec2types.CreateFleetError {
	return ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String("msg"),
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{InstanceType: ec2types.InstanceType(typ), SubnetId: aws.String(subnet)}}}
}

func TestFleetRequestShape(t *testing.T) {
	api := &fakeAPI{out: &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{
		InstanceIds: []string{"i-1"}, InstanceType: "g5.xlarge", Lifecycle: ec2types.InstanceLifecycleSpot,
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecification{LaunchTemplateName: aws.String("karpx/demo/gpu")},
			Overrides:                   &ec2types.FleetLaunchTemplateOverrides{InstanceType: "g5.xlarge", SubnetId: aws.String("subnet-a")},
		},
	}}}}
	p := NewProvider(api, "demo", instancetype.NewUnavailableOfferings())
	inst, err := p.Launch(context.Background(), request("spot"))
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID != "i-1" || inst.Zone != "us-east-1a" || inst.ImageID != "ami-gpu" || inst.CapacityType != "spot" || inst.Type != "g5.xlarge" {
		t.Errorf("instance %+v", inst)
	}
	in := api.in
	if in.Type != ec2types.FleetTypeInstant || aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity) != 1 ||
		in.TargetCapacitySpecification.DefaultTargetCapacityType != "spot" ||
		in.SpotOptions.AllocationStrategy != ec2types.SpotAllocationStrategyPriceCapacityOptimized || in.OnDemandOptions != nil ||
		len(in.LaunchTemplateConfigs) != 2 || len(in.LaunchTemplateConfigs[0].Overrides) != 2 || len(in.TagSpecifications) != 2 ||
		in.TagSpecifications[0].ResourceType != ec2types.ResourceTypeInstance || in.TagSpecifications[1].ResourceType != ec2types.ResourceTypeVolume {
		t.Errorf("request %+v", in)
	}
	_, _ = p.Launch(context.Background(), request("on-demand"))
	if api.in.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyLowestPrice || api.in.SpotOptions != nil {
		t.Errorf("on-demand request %+v", api.in)
	}
}

func TestLaunchErrors(t *testing.T) {
	ice := ec2api.CodeInsufficientInstanceCapacity
	for _, c := range []struct {
		name   string
		errs   []ec2types.CreateFleetError
		check  func(error) bool
		marked int
	}{
		{"all ICE", []ec2types.CreateFleetError{fleetErr(ice, "m5.large", "subnet-a"), fleetErr(ice, "m5.large", "subnet-b"), fleetErr("VcpuLimitExceeded", "g5.xlarge", "subnet-a")},
			func(err error) bool { var e *cloudprovider.InsufficientCapacityError; return errors.As(err, &e) }, 3},
		{"invalid", []ec2types.CreateFleetError{fleetErr("InvalidParameterValue", "m5.large", "subnet-a")},
			func(err error) bool {
				var e *cloudprovider.LaunchError
				return errors.As(err, &e) && e.Code == "InvalidParameterValue"
			}, 0},
		{"ICE and throttled", []ec2types.CreateFleetError{fleetErr(ice, "m5.large", "subnet-a"), fleetErr("RequestLimitExceeded", "m5.large", "subnet-b")},
			func(err error) bool {
				var e *cloudprovider.InsufficientCapacityError
				var l *cloudprovider.LaunchError
				return err != nil && !errors.As(err, &e) && !errors.As(err, &l)
			}, 1},
	} {
		u := instancetype.NewUnavailableOfferings()
		p := NewProvider(&fakeAPI{out: &ec2.CreateFleetOutput{Errors: c.errs}}, "demo", u)
		_, err := p.Launch(context.Background(), request("on-demand"))
		if !c.check(err) {
			t.Errorf("%s: unexpected error %T %v", c.name, err, err)
		}
		if u.Len() != c.marked {
			t.Errorf("%s: %d offerings marked, want %d", c.name, u.Len(), c.marked)
		}
		if c.marked > 0 && !u.IsUnavailable("m5.large", "us-east-1a", "on-demand") {
			t.Errorf("%s: m5.large/us-east-1a not marked", c.name)
		}
	}
}

func TestProviderID(t *testing.T) {
	if got := ProviderID("us-east-1a", "i-0abc"); got != "aws:///us-east-1a/i-0abc" {
		t.Fatal(got)
	}
	for pid, want := range map[string]string{"aws:///us-east-1a/i-0abc": "i-0abc", "aws:///i-0abc": "i-0abc", "gce://x": "", "aws:///us-east-1a/": ""} {
		got, err := ParseProviderID(pid)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%s: %q %v", pid, got, err)
		}
	}
}
