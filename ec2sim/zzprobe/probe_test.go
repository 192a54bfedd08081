package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Println("----", r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("X-Amz-Target"))
		v, err := url.ParseQuery(string(b))
		if err != nil || r.Header.Get("X-Amz-Target") != "" {
			fmt.Println(string(b))
		} else {
			keys := []string{}
			for k := range v { keys = append(keys, k) }
			sort.Strings(keys)
			for _, k := range keys { fmt.Printf("  %s=%s\n", k, v[k]) }
		}
		w.WriteHeader(400)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), RetryMaxAttempts: 1}
	c := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	ctx := context.Background()
	c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
			Overrides: []types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String("subnet-1"), AvailabilityZone: aws.String("us-east-1a"), Priority: aws.Float64(1), ImageId: aws.String("ami-1")}, {InstanceType: "c5.large"}}}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(2), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeSpot},
		SpotOptions: &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized},
		OnDemandOptions: &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}, {ResourceType: types.ResourceTypeFleet, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}},
	})
	c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-1", "i-2"}, Filters: []types.Filter{{Name: aws.String("tag:a"), Values: []string{"x", "y"}}}, MaxResults: aws.Int32(5), NextToken: aws.String("tok")})
	c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.large"}, MaxResults: aws.Int32(100)})
	c.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone})
	c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-1"}, Owners: []string{"amazon"}, ExecutableUsers: []string{"self"}})
	c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt"), LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String("ami-1"), UserData: aws.String("dXNlcg=="), SecurityGroupIds: []string{"sg-1"},
		TagSpecifications: []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}},
		MetadataOptions: &types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: types.LaunchTemplateHttpTokensStateRequired},
		IamInstanceProfile: &types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("p")},
		BlockDeviceMappings: []types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20)}}},
		NetworkInterfaces: []types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{DeviceIndex: aws.Int32(0), Groups: []string{"sg-2"}}},
	}, TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}})
	c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"lt"}, LaunchTemplateIds: []string{"lt-1"}})
	c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("lt")})
	c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-1"}})
	c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-1"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	c.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}, AvailabilityZone: aws.String("us-east-1a")})
	c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-1"}})
	c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-1"}, GroupNames: []string{"n"}})
	c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1a"}})
	s := ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	_, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/x")})
	fmt.Println(err)
}
