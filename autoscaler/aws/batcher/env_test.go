package batcher_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
)

// launchTemplate creates a launch template of an AL2023 AMI.
func launchTemplate(t testing.TB, e *ec2apitest.Env, name string) {
	t.Helper()
	ctx := context.Background()
	p, err := e.Client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id")},
		func(o *ssm.Options) { o.HTTPClient = ec2apitest.LoopbackHTTP })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: p.Parameter.Value}}, ec2apitest.Loopback); err != nil {
		t.Fatal(err)
	}
}

// fleet is the CreateFleet request of karpx's instance provider for one
// instance of launch template lt, tagged with tags.
func fleet(lt string, tags map[string]string) *ec2.CreateFleetInput {
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{
				{InstanceType: "m5.large", AvailabilityZone: aws.String("us-east-1a")},
				{InstanceType: "m5.xlarge", AvailabilityZone: aws.String("us-east-1b")},
			}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		OnDemandOptions:             &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
	}
	if len(tags) > 0 {
		ts := ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeInstance}
		for k, v := range tags {
			ts.Tags = append(ts.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []ec2types.TagSpecification{ts}
	}
	return in
}
