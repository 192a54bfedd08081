package instancetype

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpx/karpx/autoscaler/aws/capacity"
	"github.com/karpx/karpx/catalog"
)

func TestNewInfoFromCatalogue(t *testing.T) {
	info, ok := NewInfo(ec2types.InstanceTypeInfo{InstanceType: "m5.large", SupportedUsageClasses: []ec2types.UsageClassType{"on-demand", "spot"}})
	if !ok {
		t.Fatal("m5.large rejected")
	}
	cat, _ := catalog.Get("m5.large")
	if info.Labels[corev1.LabelArchStable] != "amd64" || !info.Allocatable.Cpu().Equal(*cat.Allocatable.Cpu()) ||
		info.Capacity.Cpu().Value() != 2 || *info.OnDemandPriceUSDPerHour != *cat.OnDemandPriceUSDPerHour || len(info.CapacityTypes) != 2 {
		t.Fatalf("%+v", info)
	}
}

func TestNewInfoDerived(t *testing.T) {
	info, ok := NewInfo(ec2types.InstanceTypeInfo{
		InstanceType:          "zz9g.2xlarge",
		SupportedUsageClasses: []ec2types.UsageClassType{"on-demand"},
		ProcessorInfo:         &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{"arm64"}},
		VCpuInfo:              &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(8)},
		MemoryInfo:            &ec2types.MemoryInfo{SizeInMiB: aws.Int64(32768)},
		NetworkInfo:           &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(4), Ipv4AddressesPerInterface: aws.Int32(15)},
		GpuInfo:               &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Count: aws.Int32(1), Name: aws.String("T4g")}}},
	})
	if !ok {
		t.Fatal("rejected")
	}
	l := info.Labels
	if l[corev1.LabelArchStable] != "arm64" || l[catalog.LabelInstanceCPU] != "8" || l[catalog.LabelInstanceFamily] != "zz9g" ||
		l[catalog.LabelInstanceCategory] != "zz" || l[catalog.LabelInstanceGPUCount] != "1" || l[catalog.LabelInstanceGPUName] != "t4g" {
		t.Errorf("labels %v", l)
	}
	if info.Capacity.Pods().Value() != 58 || info.Allocatable.Cpu().MilliValue() != 8000-capacity.DefaultKubeReservedMilliCPU(8) ||
		info.Allocatable.Memory().Value() >= info.Capacity.Memory().Value() || info.OnDemandPriceUSDPerHour != nil {
		t.Errorf("resources %v / %v", info.Capacity, info.Allocatable)
	}
	if capacity.DefaultKubeReservedMilliCPU(1) != 60 || capacity.DefaultKubeReservedMilliCPU(4) != 80 || capacity.DefaultKubeReservedMilliCPU(8) != 90 {
		t.Errorf("reserved cpu %d %d %d", capacity.DefaultKubeReservedMilliCPU(1), capacity.DefaultKubeReservedMilliCPU(4), capacity.DefaultKubeReservedMilliCPU(8))
	}
}

func TestOfferingPrice(t *testing.T) {
	od := 0.1
	info := &Info{OnDemandPriceUSDPerHour: &od}
	if p, ok := offeringPrice(info, "spot", 0.03); !ok || p != 0.03 {
		t.Error("spot price")
	}
	if p, ok := offeringPrice(info, "spot", 0); !ok || p != od {
		t.Error("spot falls back to on-demand")
	}
	if _, ok := offeringPrice(&Info{}, "on-demand", 0); ok {
		t.Error("unpriced on-demand offered")
	}
}

func TestUnavailableOfferings(t *testing.T) {
	u := NewUnavailableOfferings()
	u.MarkUnavailable("m5.large", "us-east-1a", "spot")
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.IsUnavailable("m5.large", "us-east-1a", "on-demand") || u.IsUnavailable("m5.large", "us-east-1b", "spot") {
		t.Fatal("keys mixed up")
	}
}
