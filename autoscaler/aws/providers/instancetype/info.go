package instancetype

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpx/karpx/autoscaler/aws/capacity"
	"github.com/karpx/karpx/autoscaler/aws/providers/ami"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog"
)

// Info is the static part of an instance type: what it is and holds, not
// where it is sold. Labels, Capacity and Allocatable are shared between
// callers and must not be modified.
type Info struct {
	// Name is the EC2 instance type, for example "m5.large".
	Name string
	// Labels are the single-valued node labels of the type.
	Labels map[string]string
	// Capacity is the node's status.capacity.
	Capacity corev1.ResourceList
	// Allocatable is the node's status.allocatable.
	Allocatable corev1.ResourceList
	// OnDemandPriceUSDPerHour is the hourly on-demand price, nil if unknown.
	OnDemandPriceUSDPerHour *float64
	// CapacityTypes are the purchase options EC2 sells the type with
	// ("on-demand", "spot").
	CapacityTypes []string
	// Zones are the zones EC2 offers the type in, sorted.
	Zones []string
}

// NewInfo builds the static description of an EC2 instance type from its
// catalogue entry, or from the DescribeInstanceTypes answer when the
// catalogue lacks it. It returns false for architectures karpx cannot boot.
func NewInfo(t ec2types.InstanceTypeInfo) (Info, bool) {
	name := string(t.InstanceType)
	info := Info{Name: name}
	for _, uc := range t.SupportedUsageClasses {
		switch uc {
		case ec2types.UsageClassTypeOnDemand:
			info.CapacityTypes = append(info.CapacityTypes, cloudprovider.CapacityTypeOnDemand)
		case ec2types.UsageClassTypeSpot:
			info.CapacityTypes = append(info.CapacityTypes, cloudprovider.CapacityTypeSpot)
		}
	}
	if len(t.SupportedUsageClasses) == 0 {
		info.CapacityTypes = []string{cloudprovider.CapacityTypeOnDemand, cloudprovider.CapacityTypeSpot}
	}
	if c, ok := catalog.Get(name); ok {
		info.Labels, info.Capacity, info.Allocatable, info.OnDemandPriceUSDPerHour = c.Labels, c.Capacity(), c.Allocatable, c.OnDemandPriceUSDPerHour
	} else {
		info.Labels, info.Capacity, info.Allocatable = derive(t)
	}
	if a := info.Labels[corev1.LabelArchStable]; a != "amd64" && a != "arm64" {
		return Info{}, false
	}
	return info, true
}

// derive computes labels, capacity and allocatable for a type missing from
// the catalogue. Pods follow the EKS max-pods formula
// (ENIs × (IPv4 per ENI − 1) + 2); the reserved cpu and memory follow the
// EKS AMI's kube-reserved formula and a 100Mi hard eviction threshold, so
// derived types are comparable to catalogue ones.
func derive(t ec2types.InstanceTypeInfo) (map[string]string, corev1.ResourceList, corev1.ResourceList) {
	name := string(t.InstanceType)
	family, size, _ := strings.Cut(name, ".")
	arch := ""
	if t.ProcessorInfo != nil && len(t.ProcessorInfo.SupportedArchitectures) > 0 {
		arch = ami.KubernetesArch(string(t.ProcessorInfo.SupportedArchitectures[0]))
	}
	var vcpus, memMiB int64
	if t.VCpuInfo != nil {
		vcpus = int64(aws.ToInt32(t.VCpuInfo.DefaultVCpus))
	}
	if t.MemoryInfo != nil {
		memMiB = aws.ToInt64(t.MemoryInfo.SizeInMiB)
	}
	labels := map[string]string{
		corev1.LabelInstanceTypeStable:    name,
		corev1.LabelArchStable:            arch,
		corev1.LabelOSStable:              "linux",
		catalog.LabelInstanceCPU:          strconv.FormatInt(vcpus, 10),
		catalog.LabelInstanceMemory:       strconv.FormatInt(memMiB, 10),
		catalog.LabelInstanceFamily:       family,
		catalog.LabelInstanceCategory:     family[:max(strings.IndexAny(family, "0123456789"), 0)],
		"karpenter.k8s.aws/instance-size": size,
	}
	var gpus int64
	if t.GpuInfo != nil {
		for _, g := range t.GpuInfo.Gpus {
			gpus += int64(aws.ToInt32(g.Count))
			labels[catalog.LabelInstanceGPUName] = strings.ToLower(aws.ToString(g.Name))
		}
	}
	pods := int64(110)
	if n := t.NetworkInfo; n != nil && aws.ToInt32(n.MaximumNetworkInterfaces) > 0 {
		pods = int64(aws.ToInt32(n.MaximumNetworkInterfaces))*(int64(aws.ToInt32(n.Ipv4AddressesPerInterface))-1) + 2
	}
	capa := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(vcpus, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
	if gpus > 0 {
		labels[catalog.LabelInstanceGPUCount] = strconv.FormatInt(gpus, 10)
		capa["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	alloc := capa.DeepCopy()
	alloc[corev1.ResourceCPU] = *resource.NewMilliQuantity(vcpus*1000-capacity.DefaultKubeReservedMilliCPU(vcpus), resource.DecimalSI)
	alloc[corev1.ResourceMemory] = *resource.NewQuantity((memMiB-(11*pods+255)-100)*1024*1024, resource.BinarySI)
	alloc[corev1.ResourceEphemeralStorage] = resource.MustParse("17Gi")
	return labels, capa, alloc
}
