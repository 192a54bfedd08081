package ec2sim

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// al2023 resolves the AL2023 alias for arch through SSM, as Karpenter does.
func (e *testEnv) al2023(t *testing.T, arch string) string {
	t.Helper()
	out, err := e.ssm.GetParameter(context.Background(), &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/" + arch + "/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	return *out.Parameter.Value
}

func (e *testEnv) launchTemplate(t *testing.T, name, imageID, userData string) string {
	t.Helper()
	data := &types.RequestLaunchTemplateData{ImageId: aws.String(imageID),
		TagSpecifications: []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeInstance,
			Tags: []types.Tag{{Key: aws.String("from-template"), Value: aws.String("yes")}}}}}
	if userData != "" {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(userData)))
	}
	out, err := e.ec2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data})
	if err != nil {
		t.Fatal(err)
	}
	return *out.LaunchTemplate.LaunchTemplateId
}

func fleetInput(lt string, ct types.DefaultTargetCapacityType, total int32, tags map[string]string, overrides ...types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetInput {
	in := &ec2.CreateFleetInput{
		Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   overrides}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(total), DefaultTargetCapacityType: ct},
	}
	if len(tags) > 0 {
		ts := types.TagSpecification{ResourceType: types.ResourceTypeInstance}
		for k, v := range tags {
			ts.Tags = append(ts.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []types.TagSpecification{ts}
	}
	return in
}

func ov(instanceType, zone string) types.FleetLaunchTemplateOverridesRequest {
	o := types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(instanceType)}
	if zone != "" {
		o.AvailabilityZone = aws.String(zone)
	}
	return o
}

func TestFleetDescribeTerminateRoundTrip(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second, ShuttingDownDelay: 2 * time.Second, TerminatedRetention: time.Minute})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	env.launchTemplate(t, "karpx-default", ami, "")

	// m5.large is the cheapest of the three on-demand.
	out, err := env.ec2.CreateFleet(ctx, fleetInput("karpx-default", types.DefaultTargetCapacityTypeOnDemand, 2,
		map[string]string{"karpenter.sh/nodepool": "default", "team": "a"},
		ov("m5.xlarge", "us-east-1a"), ov("m5.large", "us-east-1b"), ov("c5.2xlarge", "us-east-1c")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 0 || len(out.Instances) != 1 {
		t.Fatalf("errors %+v instances %+v", out.Errors, out.Instances)
	}
	fi := out.Instances[0]
	if fi.InstanceType != "m5.large" || fi.Lifecycle != types.InstanceLifecycleOnDemand || len(fi.InstanceIds) != 2 ||
		*fi.LaunchTemplateAndOverrides.Overrides.AvailabilityZone != "us-east-1b" || out.FleetId == nil {
		t.Fatalf("fleet instance %+v", fi)
	}
	ids := fi.InstanceIds

	desc := func(in *ec2.DescribeInstancesInput) []types.Instance {
		t.Helper()
		var all []types.Instance
		pager := ec2.NewDescribeInstancesPaginator(env.ec2, in)
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Reservations {
				all = append(all, r.Instances...)
			}
		}
		return all
	}
	got := desc(&ec2.DescribeInstancesInput{InstanceIds: ids})
	if len(got) != 2 || got[0].State.Name != types.InstanceStateNamePending || *got[0].State.Code != 0 {
		t.Fatalf("want 2 pending, got %+v", got)
	}
	in := got[0]
	if *in.Placement.AvailabilityZone != "us-east-1b" || *in.ImageId != ami || in.Architecture != types.ArchitectureValuesX8664 ||
		*in.PrivateDnsName == "" || *in.PrivateDnsName != "ip-"+dashed(*in.PrivateIpAddress)+".ec2.internal" {
		t.Fatalf("instance %+v", in)
	}
	tags := map[string]string{}
	for _, tg := range in.Tags {
		tags[*tg.Key] = *tg.Value
	}
	if tags["karpenter.sh/nodepool"] != "default" || tags["team"] != "a" || tags["from-template"] != "yes" {
		t.Fatalf("tags %v", tags)
	}

	clk.Step(time.Second)
	byTag := desc(&ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("tag:karpenter.sh/nodepool"), Values: []string{"default"}},
		{Name: aws.String("instance-state-name"), Values: []string{"running"}}}})
	if len(byTag) != 2 {
		t.Fatalf("want 2 running by tag, got %d", len(byTag))
	}
	if n := len(desc(&ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("tag-key"), Values: []string{"nope"}}}})); n != 0 {
		t.Fatalf("tag-key filter matched %d", n)
	}
	// Pagination walks every instance once.
	if n := len(desc(&ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})); n != 2 {
		t.Fatalf("paginated: %d", n)
	}

	if _, err := env.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: ids[:1], Tags: []types.Tag{{Key: aws.String("Name"), Value: aws.String("n1")}}}); err != nil {
		t.Fatal(err)
	}
	term, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if sc := term.TerminatingInstances[0]; sc.PreviousState.Name != types.InstanceStateNameRunning || sc.CurrentState.Name != types.InstanceStateNameShuttingDown {
		t.Fatalf("state change %+v %+v", sc.PreviousState, sc.CurrentState)
	}
	clk.Step(2 * time.Second)
	got = desc(&ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	if got[0].State.Name != types.InstanceStateNameTerminated || *got[0].State.Code != 48 || got[0].StateReason == nil || *got[0].Tags[0].Value == "" {
		t.Fatalf("terminated instance %+v", got[0])
	}
	if n := len(desc(&ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"running", "pending"}}}})); n != 1 {
		t.Fatalf("running after terminate: %d", n)
	}
	// Terminated instances disappear after the retention.
	clk.Step(time.Minute + time.Second)
	_, err = env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	apiErr(t, err, "InvalidInstanceID.NotFound", 400)
	snap := env.sim.Instances()
	if len(snap) != 1 || snap[0].ID != ids[1] || snap[0].State != StateRunning || snap[0].Tags["team"] != "a" {
		t.Fatalf("snapshot %+v", snap)
	}
	// Subnet accounting: one address in use in us-east-1b.
	subnets, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}}}})
	if err != nil || *subnets.Subnets[0].AvailableIpAddressCount != 8192-5-1 {
		t.Fatalf("subnet free addresses: %v %+v", err, subnets)
	}
}

func dashed(ip string) string {
	b := []byte(ip)
	for i := range b {
		if b[i] == '.' {
			b[i] = '-'
		}
	}
	return string(b)
}

func TestCreateFleetPerOverrideErrorsAndCapacity(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	env.launchTemplate(t, "amd", env.al2023(t, "x86_64"), "")

	// An unknown type is a per-override error; the valid override launches.
	out, err := env.ec2.CreateFleet(ctx, fleetInput("amd", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.huge", ""), ov("c5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || *out.Errors[0].ErrorCode != "InvalidParameterValue" || *out.Errors[0].ErrorMessage != "Invalid value 'm5.huge' for InstanceType." ||
		out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType != "m5.huge" || len(out.Instances) != 1 {
		t.Fatalf("errors %+v instances %d", out.Errors, len(out.Instances))
	}
	// An arm64 type with an x86_64 AMI is refused like EC2 does.
	out, err = env.ec2.CreateFleet(ctx, fleetInput("amd", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m7g.large", "")))
	if err != nil || len(out.Instances) != 0 || *out.Errors[0].ErrorCode != "InvalidParameterValue" {
		t.Fatalf("arch mismatch: %v %+v", err, out)
	}

	// Insufficient capacity in one pool: the error names the pool and the
	// next cheapest pool launches.
	if err := env.sim.Faults().AddCapacity(CapacityFault{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}); err != nil {
		t.Fatal(err)
	}
	out, err = env.ec2.CreateFleet(ctx, fleetInput("amd", types.DefaultTargetCapacityTypeSpot, 1, nil, ov("m5.large", "us-east-1a"), ov("m5.xlarge", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || *out.Errors[0].ErrorCode != "InsufficientInstanceCapacity" ||
		out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType != "m5.large" ||
		*out.Errors[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone != "us-east-1a" || out.Errors[0].Lifecycle != types.InstanceLifecycleSpot {
		t.Fatalf("ICE errors %+v", out.Errors)
	}
	if len(out.Instances) != 1 || out.Instances[0].InstanceType != "m5.xlarge" || out.Instances[0].Lifecycle != types.InstanceLifecycleSpot {
		t.Fatalf("fallback %+v", out.Instances)
	}
	// The same pool on-demand is not affected.
	out, err = env.ec2.CreateFleet(ctx, fleetInput("amd", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a")))
	if err != nil || len(out.Instances) != 1 || len(out.Errors) != 0 {
		t.Fatalf("on-demand: %v %+v", err, out)
	}
	// Every pool refused: no instance, one error per pool, HTTP 200.
	_ = env.sim.Faults().AddCapacity(CapacityFault{InstanceType: "c6i.*"})
	out, err = env.ec2.CreateFleet(ctx, fleetInput("amd", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("c6i.large", ""), ov("c6i.xlarge", "")))
	if err != nil || len(out.Instances) != 0 || len(out.Errors) != 6 {
		t.Fatalf("all refused: %v instances=%d errors=%d", err, len(out.Instances), len(out.Errors))
	}

	// prioritized picks the lowest priority number, not the lowest price.
	in := fleetInput("amd", types.DefaultTargetCapacityTypeOnDemand, 1, nil,
		types.FleetLaunchTemplateOverridesRequest{InstanceType: "m5.large", Priority: aws.Float64(2)},
		types.FleetLaunchTemplateOverridesRequest{InstanceType: "m5.2xlarge", Priority: aws.Float64(1), AvailabilityZone: aws.String("us-east-1c")})
	in.OnDemandOptions = &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyPrioritized}
	out, err = env.ec2.CreateFleet(ctx, in)
	if err != nil || len(out.Instances) != 1 || out.Instances[0].InstanceType != "m5.2xlarge" {
		t.Fatalf("prioritized: %v %+v", err, out)
	}

	// Unknown launch template: errorSet entry with EC2's code.
	out, err = env.ec2.CreateFleet(ctx, fleetInput("nope", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
	if err != nil || len(out.Errors) != 1 || *out.Errors[0].ErrorCode != "InvalidLaunchTemplateName.NotFoundException" {
		t.Fatalf("unknown template: %v %+v", err, out)
	}
	if got := env.sim.Stats()["CreateFleet"]; got.Requests != 7 || got.Errors != 0 {
		t.Fatalf("CreateFleet stats %+v", got)
	}
}

func TestRunInstances(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	ami := env.al2023(t, "arm64")
	out, err := env.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(ami), InstanceType: "m7g.large",
		MinCount: aws.Int32(2), MaxCount: aws.Int32(2), Placement: &types.Placement{AvailabilityZone: aws.String("us-east-1c")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 2 || *out.Instances[0].Placement.AvailabilityZone != "us-east-1c" || out.Instances[0].Architecture != types.ArchitectureValuesArm64 {
		t.Fatalf("%+v", out.Instances)
	}
	_ = env.sim.Faults().AddCapacity(CapacityFault{InstanceType: "m7g.large"})
	_, err = env.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(ami), InstanceType: "m7g.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	apiErr(t, err, "InsufficientInstanceCapacity", 400)
}

// TestRunInstancesRejectsBadRequests checks RunInstances's parameter and
// placement errors, and that SubnetId places the instance in that subnet.
func TestRunInstancesRejectsBadRequests(t *testing.T) {
	env := newTestEnv(t, Config{Throttle: ThrottleConfig{Disabled: true}}) // more calls than RunInstances's bucket of 5
	ctx := context.Background()
	ami := env.al2023(t, "arm64")
	run := func(edit func(*ec2.RunInstancesInput)) (*ec2.RunInstancesOutput, error) {
		in := &ec2.RunInstancesInput{ImageId: aws.String(ami), InstanceType: "m7g.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)}
		edit(in)
		return env.ec2.RunInstances(ctx, in)
	}
	ud := func(s string) *string { return aws.String(base64.StdEncoding.EncodeToString([]byte(s))) }
	for _, tc := range []struct {
		name string
		edit func(*ec2.RunInstancesInput)
		code string
	}{
		{"MinCount above MaxCount", func(in *ec2.RunInstancesInput) { in.MinCount = aws.Int32(3) }, "InvalidParameterValue"},
		{"user data not base64", func(in *ec2.RunInstancesInput) { in.UserData = aws.String("!!!") }, "InvalidUserData.Malformed"},
		{"bad karpx-sim marker", func(in *ec2.RunInstancesInput) { in.UserData = ud("# karpx-sim: boot-delay=soon\n") }, "InvalidParameterValue"},
		{"malformed subnet", func(in *ec2.RunInstancesInput) { in.SubnetId = aws.String("subnet-xyz") }, "InvalidSubnetID.Malformed"},
		{"unknown subnet", func(in *ec2.RunInstancesInput) { in.SubnetId = aws.String("subnet-0123456789abcdef0") }, "InvalidSubnetID.NotFound"},
		{"unknown zone", func(in *ec2.RunInstancesInput) {
			in.Placement = &types.Placement{AvailabilityZone: aws.String("us-east-1z")}
		}, "InvalidParameterValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(tc.edit)
			apiErr(t, err, tc.code, 400)
		})
	}

	subnets, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	last := subnets.Subnets[len(subnets.Subnets)-1]
	out, err := run(func(in *ec2.RunInstancesInput) { in.SubnetId = last.SubnetId })
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Instances[0]; *got.SubnetId != *last.SubnetId || *got.Placement.AvailabilityZone != *last.AvailabilityZone {
		t.Fatalf("launched in %s/%s, want subnet %s in %s", *got.SubnetId, *got.Placement.AvailabilityZone, *last.SubnetId, *last.AvailabilityZone)
	}
}
