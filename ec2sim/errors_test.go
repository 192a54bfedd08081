package ec2sim

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// TestBadRequestsGetEC2Codes sends malformed requests through the real SDK
// and checks the error code and HTTP status it surfaces.
func TestBadRequestsGetEC2Codes(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	env.launchTemplate(t, "dup", ami, "")

	for _, tc := range []struct {
		name   string
		call   func() error
		code   string
		status int
	}{
		{"unknown action", func() error {
			_, err := env.ec2Client(1, rewriteBody(func(v url.Values) { v.Set("Action", "DescribeUnicorns") })).
				DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
			return err
		}, "InvalidAction", 400},
		{"missing Version", func() error {
			_, err := env.ec2Client(1, rewriteBody(func(v url.Values) { v.Del("Version") })).
				DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
			return err
		}, "MissingParameter", 400},
		{"CreateFleet without LaunchTemplateConfigs", func() error {
			_, err := env.ec2.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant, LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{},
				TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1)}})
			return err
		}, "MissingParameter", 400},
		{"CreateFleet without TotalTargetCapacity", func() error {
			_, err := env.ec2Client(1, rewriteBody(func(v url.Values) { v.Del("TargetCapacitySpecification.TotalTargetCapacity") })).
				CreateFleet(ctx, fleetInput("dup", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
			return err
		}, "MissingParameter", 400},
		{"TerminateInstances without ids", func() error {
			_, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{}})
			return err
		}, "MissingParameter", 400},
		{"CreateTags without tags", func() error {
			_, err := env.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: []types.Tag{}})
			return err
		}, "MissingParameter", 400},
		{"malformed instance id", func() error {
			_, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-nothex"}})
			return err
		}, "InvalidInstanceID.Malformed", 400},
		{"unknown instance id", func() error {
			_, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
			return err
		}, "InvalidInstanceID.NotFound", 400},
		{"CreateTags on unknown instance", func() error {
			_, err := env.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}})
			return err
		}, "InvalidInstanceID.NotFound", 400},
		{"reserved tag key", func() error {
			_, err := env.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: []types.Tag{{Key: aws.String("aws:x"), Value: aws.String("b")}}})
			return err
		}, "InvalidParameterValue", 400},
		{"malformed AMI id", func() error {
			_, err := env.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-xyz"}})
			return err
		}, "InvalidAMIID.Malformed", 400},
		{"unknown AMI id", func() error {
			_, err := env.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-0123456789abcdef0"}})
			return err
		}, "InvalidAMIID.NotFound", 400},
		{"unknown subnet", func() error {
			_, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdef0"}})
			return err
		}, "InvalidSubnetID.NotFound", 400},
		{"malformed subnet", func() error {
			_, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-1"}})
			return err
		}, "InvalidSubnetID.Malformed", 400},
		{"unknown security group", func() error {
			_, err := env.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0123456789abcdef0"}})
			return err
		}, "InvalidGroup.NotFound", 400},
		{"malformed security group", func() error {
			_, err := env.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"group"}})
			return err
		}, "InvalidGroupId.Malformed", 400},
		{"unknown instance type", func() error {
			_, err := env.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.huge"}})
			return err
		}, "InvalidInstanceType", 400},
		{"MaxResults out of range", func() error {
			_, err := env.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(1000)})
			return err
		}, "InvalidParameterValue", 400},
		{"ids with MaxResults", func() error {
			_, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}, MaxResults: aws.Int32(5)})
			return err
		}, "InvalidParameterCombination", 400},
		{"bad NextToken", func() error {
			_, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{NextToken: aws.String("garbage")})
			return err
		}, "InvalidPaginationToken", 400},
		{"unknown filter", func() error {
			_, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("colour"), Values: []string{"red"}}}})
			return err
		}, "InvalidParameterValue", 400},
		{"unknown zone", func() error {
			_, err := env.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1z"}})
			return err
		}, "InvalidParameterValue", 400},
		{"duplicate launch template", func() error {
			_, err := env.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("dup"),
				LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami)}})
			return err
		}, "InvalidLaunchTemplateName.AlreadyExistsException", 400},
		{"malformed launch template name", func() error {
			_, err := env.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("a b"),
				LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami)}})
			return err
		}, "InvalidLaunchTemplateName.MalformedException", 400},
		{"unknown launch template name", func() error {
			_, err := env.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"missing"}})
			return err
		}, "InvalidLaunchTemplateName.NotFoundException", 400},
		{"unknown launch template id", func() error {
			_, err := env.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{"lt-0123456789abcdef0"}})
			return err
		}, "InvalidLaunchTemplateId.NotFound", 400},
		{"malformed launch template id", func() error {
			_, err := env.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String("lt-1")})
			return err
		}, "InvalidLaunchTemplateId.Malformed", 400},
		{"fleet type maintain", func() error {
			in := fleetInput("dup", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", ""))
			in.Type = types.FleetTypeMaintain
			_, err := env.ec2.CreateFleet(ctx, in)
			return err
		}, "Unsupported", 400},
		{"bad user data", func() error {
			_, err := env.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("user-data"),
				LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), UserData: aws.String("!!!")}})
			return err
		}, "InvalidUserData.Malformed", 400},
		{"dry run", func() error {
			_, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{DryRun: aws.Bool(true)})
			return err
		}, "DryRunOperation", 412},
	} {
		t.Run(tc.name, func(t *testing.T) { apiErr(t, tc.call(), tc.code, tc.status) })
	}

	// SSM: unknown parameters are ParameterNotFound, a modeled error type.
	_, err := env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.35/windows-3000/image_id")})
	apiErr(t, err, "ParameterNotFound", 400)
	var pnf *ssmtypes.ParameterNotFound
	if !errors.As(err, &pnf) {
		t.Fatalf("want *types.ParameterNotFound, got %T", err)
	}

	// The raw error document has EC2's shape.
	resp, err := http.Post(env.endpoint, "application/x-www-form-urlencoded", strings.NewReader("Action=Nope&Version=2016-11-15"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := new(strings.Builder)
	_, _ = bufCopy(buf, resp)
	for _, want := range []string{"<Response><Errors><Error><Code>InvalidAction</Code><Message>", "</Message></Error></Errors><RequestID>"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("error body %q lacks %q", buf.String(), want)
		}
	}
	if got := env.sim.Counts()["Unknown"]; got != 2 {
		t.Errorf("unknown actions counted %d, want 2", got)
	}
}

func bufCopy(b *strings.Builder, resp *http.Response) (int64, error) {
	var n int64
	p := make([]byte, 4096)
	for {
		m, err := resp.Body.Read(p)
		b.Write(p[:m])
		n += int64(m)
		if err != nil {
			return n, nil
		}
	}
}
