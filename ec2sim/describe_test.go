package ec2sim

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpx/karpx/catalog"
)

func TestDescribeInstanceTypesPaginatesTheWholeCatalogue(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	pager := ec2.NewDescribeInstanceTypesPaginator(env.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	byName := map[types.InstanceType]types.InstanceTypeInfo{}
	pages := 0
	for pager.HasMorePages() {
		out, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		for _, it := range out.InstanceTypes {
			if _, dup := byName[it.InstanceType]; dup {
				t.Fatalf("%s returned twice", it.InstanceType)
			}
			byName[it.InstanceType] = it
		}
	}
	if len(byName) != catalog.Len() || len(byName) != 1363 {
		t.Fatalf("got %d types, want %d", len(byName), catalog.Len())
	}
	if want := (1363 + 99) / 100; pages != want || env.sim.Counts()["DescribeInstanceTypes"] != int64(want) {
		t.Fatalf("pages=%d calls=%d, want %d", pages, env.sim.Counts()["DescribeInstanceTypes"], want)
	}

	m5 := byName["m5.large"]
	if *m5.VCpuInfo.DefaultVCpus != 2 || *m5.MemoryInfo.SizeInMiB != 8192 || m5.ProcessorInfo.SupportedArchitectures[0] != types.ArchitectureTypeX8664 {
		t.Errorf("m5.large: vcpu=%d mem=%d arch=%v", *m5.VCpuInfo.DefaultVCpus, *m5.MemoryInfo.SizeInMiB, m5.ProcessorInfo.SupportedArchitectures)
	}
	if m5.Hypervisor != types.InstanceTypeHypervisorNitro || len(m5.SupportedUsageClasses) != 2 || !*m5.CurrentGeneration {
		t.Errorf("m5.large: hypervisor=%s usage=%v current=%v", m5.Hypervisor, m5.SupportedUsageClasses, *m5.CurrentGeneration)
	}
	// The ENI limits reproduce the catalogue's max pods: ENIs*(IPs-1)+2.
	if enis, ips := *m5.NetworkInfo.MaximumNetworkInterfaces, *m5.NetworkInfo.Ipv4AddressesPerInterface; enis*(ips-1)+2 != 29 {
		t.Errorf("m5.large ENI limits %d×%d do not give 29 pods", enis, ips)
	}
	if a1 := byName["a1.large"]; a1.ProcessorInfo.SupportedArchitectures[0] != types.ArchitectureTypeArm64 {
		t.Errorf("a1.large arch %v", a1.ProcessorInfo.SupportedArchitectures)
	}
	g5 := byName["g5.xlarge"]
	if g5.GpuInfo == nil || *g5.GpuInfo.Gpus[0].Count != 1 || *g5.GpuInfo.Gpus[0].Manufacturer != "NVIDIA" || *g5.GpuInfo.Gpus[0].Name != "A10G" {
		t.Errorf("g5.xlarge GPU info %+v", g5.GpuInfo)
	}
	if inf := byName["inf1.24xlarge"]; inf.NeuronInfo == nil || *inf.NeuronInfo.NeuronDevices[0].Count != 16 {
		t.Errorf("inf1.24xlarge neuron info %+v", inf.NeuronInfo)
	}
	if metal := byName["c5.metal"]; !*metal.BareMetal {
		t.Errorf("c5.metal is not bare metal")
	}

	// Filters and explicit names.
	out, err := env.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{
		Filters: []types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.*"}},
			{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.InstanceTypes {
		if string(it.InstanceType)[:3] != "m5." {
			t.Errorf("filter returned %s", it.InstanceType)
		}
	}
	if len(out.InstanceTypes) == 0 {
		t.Error("m5.* filter returned nothing")
	}
	named, err := env.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"t3.micro", "c7g.large"}})
	if err != nil || len(named.InstanceTypes) != 2 || named.NextToken != nil {
		t.Fatalf("named lookup: %v %+v", err, named)
	}
}

func TestInstanceTypeOfferingsAndSpotPrices(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	n := 0
	zones := map[string]int{}
	pager := ec2.NewDescribeInstanceTypeOfferingsPaginator(env.ec2, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone})
	for pager.HasMorePages() {
		out, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.InstanceTypeOfferings {
			n++
			zones[*o.Location]++
		}
	}
	if n != 3*catalog.Len() || zones["us-east-1a"] != catalog.Len() || len(zones) != 3 {
		t.Fatalf("offerings: %d in %v", n, zones)
	}

	prices := map[string]float64{}
	sp := ec2.NewDescribeSpotPriceHistoryPaginator(env.ec2, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}})
	for sp.HasMorePages() {
		out, err := sp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range out.SpotPriceHistory {
			v, err := strconv.ParseFloat(*p.SpotPrice, 64)
			if err != nil {
				t.Fatal(err)
			}
			prices[*p.AvailabilityZone] = v
		}
	}
	if len(prices) != 3 {
		t.Fatalf("spot prices %v", prices)
	}
	for z, p := range prices {
		if p < 0.096*0.30 || p > 0.096*0.40 {
			t.Errorf("%s: spot price %v not in 30–40%% of 0.096", z, p)
		}
		if want, _ := SpotPrice("m5.large", z); math.Abs(want-p) > 1e-6 {
			t.Errorf("%s: spot price %v, SpotPrice says %v", z, p, want)
		}
	}
}

func TestNetworkDiscovery(t *testing.T) {
	env := newTestEnv(t, Config{ClusterName: "demo"})
	ctx := context.Background()
	azs, err := env.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(azs.AvailabilityZones) != 3 || *azs.AvailabilityZones[0].ZoneId != "use1-az1" || *azs.AvailabilityZones[2].ZoneName != "us-east-1c" {
		t.Fatalf("zones %+v", azs.AvailabilityZones)
	}
	disc := []types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"demo"}}}
	subnets, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: disc})
	if err != nil {
		t.Fatal(err)
	}
	if len(subnets.Subnets) != 3 || *subnets.Subnets[0].AvailableIpAddressCount != 8192-5 {
		t.Fatalf("subnets %+v", subnets.Subnets)
	}
	none, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"other"}}}})
	if err != nil || len(none.Subnets) != 0 {
		t.Fatalf("other cluster: %v %d", err, len(none.Subnets))
	}
	sgs, err := env.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: disc})
	if err != nil || len(sgs.SecurityGroups) != 1 || *sgs.SecurityGroups[0].GroupName != "demo-node" {
		t.Fatalf("security groups: %v %+v", err, sgs)
	}
	byID, err := env.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{*subnets.Subnets[1].SubnetId}})
	if err != nil || len(byID.Subnets) != 1 || *byID.Subnets[0].AvailabilityZone != "us-east-1b" {
		t.Fatalf("subnet by id: %v %+v", err, byID)
	}
}
