package ec2sim

import (
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpx/karpx/catalog"
)

// DescribeInstanceTypes, DescribeInstanceTypeOfferings and
// DescribeSpotPriceHistory, all derived from the embedded catalogue.

// ec2Arch maps the kubernetes.io/arch label to EC2's architecture names.
func ec2Arch(k8sArch string) string {
	if k8sArch == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

// k8sArch maps EC2's architecture names to kubernetes.io/arch.
func k8sArch(ec2Arch string) string {
	if ec2Arch == "arm64" {
		return "arm64"
	}
	return "amd64"
}

type xmlProcessorInfo struct {
	SupportedArchitectures   []string `xml:"supportedArchitectures>item"`
	SustainedClockSpeedInGhz float64  `xml:"sustainedClockSpeedInGhz,omitempty"`
	Manufacturer             string   `xml:"manufacturer,omitempty"`
}

type xmlVCPUInfo struct {
	DefaultVCpus          int64 `xml:"defaultVCpus"`
	DefaultCores          int64 `xml:"defaultCores"`
	DefaultThreadsPerCore int64 `xml:"defaultThreadsPerCore"`
}

type xmlSizeMiB struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type xmlDisk struct {
	SizeInGB int64  `xml:"sizeInGB"`
	Count    int64  `xml:"count"`
	Type     string `xml:"type"`
}

type xmlStorageInfo struct {
	TotalSizeInGB int64     `xml:"totalSizeInGB"`
	Disks         []xmlDisk `xml:"disks>item"`
	NvmeSupport   string    `xml:"nvmeSupport"`
}

type xmlEBSOptimized struct {
	BaselineBandwidthInMbps  int64   `xml:"baselineBandwidthInMbps"`
	BaselineThroughputInMBps float64 `xml:"baselineThroughputInMBps"`
	BaselineIops             int64   `xml:"baselineIops"`
	MaximumBandwidthInMbps   int64   `xml:"maximumBandwidthInMbps"`
	MaximumThroughputInMBps  float64 `xml:"maximumThroughputInMBps"`
	MaximumIops              int64   `xml:"maximumIops"`
}

type xmlEBSInfo struct {
	EbsOptimizedSupport string           `xml:"ebsOptimizedSupport"`
	EncryptionSupport   string           `xml:"encryptionSupport"`
	EbsOptimizedInfo    *xmlEBSOptimized `xml:"ebsOptimizedInfo,omitempty"`
	NvmeSupport         string           `xml:"nvmeSupport"`
}

type xmlNetworkCard struct {
	NetworkCardIndex         int64   `xml:"networkCardIndex"`
	NetworkPerformance       string  `xml:"networkPerformance"`
	MaximumNetworkInterfaces int64   `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps"`
	PeakBandwidthInGbps      float64 `xml:"peakBandwidthInGbps"`
}

type xmlEFAInfo struct {
	MaximumEfaInterfaces int64 `xml:"maximumEfaInterfaces"`
}

type xmlNetworkInfo struct {
	NetworkPerformance           string           `xml:"networkPerformance"`
	MaximumNetworkInterfaces     int64            `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards          int64            `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex      int64            `xml:"defaultNetworkCardIndex"`
	NetworkCards                 []xmlNetworkCard `xml:"networkCards>item"`
	Ipv4AddressesPerInterface    int64            `xml:"ipv4AddressesPerInterface"`
	Ipv6AddressesPerInterface    int64            `xml:"ipv6AddressesPerInterface"`
	Ipv6Supported                bool             `xml:"ipv6Supported"`
	EnaSupport                   string           `xml:"enaSupport"`
	EfaSupported                 bool             `xml:"efaSupported"`
	EfaInfo                      *xmlEFAInfo      `xml:"efaInfo,omitempty"`
	EncryptionInTransitSupported bool             `xml:"encryptionInTransitSupported"`
	EnaSrdSupported              bool             `xml:"enaSrdSupported"`
}

type xmlGPUDevice struct {
	Name         string     `xml:"name"`
	Manufacturer string     `xml:"manufacturer"`
	Count        int64      `xml:"count"`
	MemoryInfo   xmlSizeMiB `xml:"memoryInfo"`
}

type xmlGPUInfo struct {
	Gpus                []xmlGPUDevice `xml:"gpus>item"`
	TotalGpuMemoryInMiB int64          `xml:"totalGpuMemoryInMiB"`
}

type xmlNeuronCore struct {
	Count   int64 `xml:"count"`
	Version int64 `xml:"version"`
}

type xmlNeuronDevice struct {
	Count      int64         `xml:"count"`
	Name       string        `xml:"name"`
	CoreInfo   xmlNeuronCore `xml:"coreInfo"`
	MemoryInfo xmlSizeMiB    `xml:"memoryInfo"`
}

type xmlNeuronInfo struct {
	NeuronDevices                []xmlNeuronDevice `xml:"neuronDevices>item"`
	TotalNeuronDeviceMemoryInMiB int64             `xml:"totalNeuronDeviceMemoryInMiB"`
}

type xmlPlacementGroupInfo struct {
	SupportedStrategies []string `xml:"supportedStrategies>item"`
}

type xmlInstanceType struct {
	InstanceType                  string                `xml:"instanceType"`
	CurrentGeneration             bool                  `xml:"currentGeneration"`
	FreeTierEligible              bool                  `xml:"freeTierEligible"`
	SupportedUsageClasses         []string              `xml:"supportedUsageClasses>item"`
	SupportedRootDeviceTypes      []string              `xml:"supportedRootDeviceTypes>item"`
	SupportedVirtualizationTypes  []string              `xml:"supportedVirtualizationTypes>item"`
	BareMetal                     bool                  `xml:"bareMetal"`
	Hypervisor                    string                `xml:"hypervisor,omitempty"`
	ProcessorInfo                 xmlProcessorInfo      `xml:"processorInfo"`
	VCpuInfo                      xmlVCPUInfo           `xml:"vCpuInfo"`
	MemoryInfo                    xmlSizeMiB            `xml:"memoryInfo"`
	InstanceStorageSupported      bool                  `xml:"instanceStorageSupported"`
	InstanceStorageInfo           *xmlStorageInfo       `xml:"instanceStorageInfo,omitempty"`
	EbsInfo                       xmlEBSInfo            `xml:"ebsInfo"`
	NetworkInfo                   xmlNetworkInfo        `xml:"networkInfo"`
	GpuInfo                       *xmlGPUInfo           `xml:"gpuInfo,omitempty"`
	NeuronInfo                    *xmlNeuronInfo        `xml:"neuronInfo,omitempty"`
	PlacementGroupInfo            xmlPlacementGroupInfo `xml:"placementGroupInfo"`
	HibernationSupported          bool                  `xml:"hibernationSupported"`
	BurstablePerformanceSupported bool                  `xml:"burstablePerformanceSupported"`
	DedicatedHostsSupported       bool                  `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported         bool                  `xml:"autoRecoverySupported"`
	SupportedBootModes            []string              `xml:"supportedBootModes>item"`
	NitroEnclavesSupport          string                `xml:"nitroEnclavesSupport"`
	NitroTpmSupport               string                `xml:"nitroTpmSupport"`
}

// previousGeneration are the families EC2 lists as previous generation.
var previousGeneration = map[string]bool{
	"a1": false, "c1": true, "c3": true, "c4": true, "cc2": true, "cr1": true, "d2": true, "g2": true, "g3": true,
	"g3s": true, "hs1": true, "i2": true, "m1": true, "m2": true, "m3": true, "m4": true, "p2": true, "p3": true,
	"r3": true, "r4": true, "t1": true, "x1": true, "x1e": true,
}

// eniLimits returns (maximum network interfaces, IPv4 addresses per
// interface) consistent with the catalogue's max pods under the ENI formula
// pods = ENIs × (IPs − 1) + 2, preferring common EC2 ENI counts.
func eniLimits(pods int64) (int64, int64) {
	if pods <= 2 {
		return 2, 2
	}
	for _, enis := range []int64{3, 4, 8, 15, 2, 7, 6, 5, 10, 12, 14, 16, 11, 9, 13, 1} {
		if (pods-2)%enis == 0 {
			if ips := (pods-2)/enis + 1; ips >= 2 && ips <= 64 {
				return enis, ips
			}
		}
	}
	enis := (pods-2)/49 + 1
	return enis, 50
}

func labelInt(it catalog.InstanceType, key string) int64 {
	v, _ := strconv.ParseInt(it.Labels[key], 10, 64)
	return v
}

func allocInt(it catalog.InstanceType, name corev1.ResourceName) int64 {
	q, ok := it.Allocatable[name]
	if !ok {
		return 0
	}
	return q.Value()
}

func gbps(mbps int64) float64 { return float64(mbps) / 1000 }

func networkPerformance(mbps int64) string {
	switch {
	case mbps <= 0:
		return "Moderate"
	case mbps < 1000:
		return "Up to 10 Gigabit"
	default:
		return strconv.FormatFloat(gbps(mbps), 'f', -1, 64) + " Gigabit"
	}
}

// instanceTypeInfo renders a catalogue entry as EC2's InstanceTypeInfo:
// the general fields here, then one helper per section (processor,
// storage and EBS, network, GPUs and Neuron accelerators).
func instanceTypeInfo(it catalog.InstanceType) xmlInstanceType {
	family := it.Labels[catalog.LabelInstanceFamily]
	hyper := it.Labels["karpenter.k8s.aws/instance-hypervisor"]
	size := it.Labels["karpenter.k8s.aws/instance-size"]
	arch := ec2Arch(it.Arch())
	vcpus := it.VCPUs()
	threads := int64(2)
	if arch == "arm64" || vcpus == 1 || strings.HasPrefix(family, "hpc") {
		threads = 1
	}
	x := xmlInstanceType{
		InstanceType:                  it.Name,
		CurrentGeneration:             !previousGeneration[family],
		FreeTierEligible:              it.Name == "t2.micro" || it.Name == "t3.micro",
		SupportedUsageClasses:         []string{"on-demand", "spot"},
		SupportedRootDeviceTypes:      []string{"ebs"},
		SupportedVirtualizationTypes:  []string{"hvm"},
		BareMetal:                     strings.Contains(size, "metal"),
		Hypervisor:                    hyper,
		VCpuInfo:                      xmlVCPUInfo{DefaultVCpus: vcpus, DefaultCores: max(1, vcpus/threads), DefaultThreadsPerCore: threads},
		MemoryInfo:                    xmlSizeMiB{SizeInMiB: it.MemoryMiB()},
		PlacementGroupInfo:            xmlPlacementGroupInfo{SupportedStrategies: []string{"cluster", "partition", "spread"}},
		BurstablePerformanceSupported: strings.HasPrefix(family, "t"),
		DedicatedHostsSupported:       true,
		AutoRecoverySupported:         labelInt(it, "karpenter.k8s.aws/instance-local-nvme") == 0,
		NitroEnclavesSupport:          "unsupported",
		NitroTpmSupport:               "unsupported",
	}
	nitro := hyper == "nitro"
	if nitro {
		x.NitroEnclavesSupport, x.NitroTpmSupport = "supported", "supported"
	}
	setProcessorInfo(&x, it, arch)
	setStorageInfo(&x, it, nitro || x.BareMetal)
	setNetworkInfo(&x, it, nitro || x.BareMetal)
	x.GpuInfo = gpuInfo(it)
	x.NeuronInfo = neuronInfo(it)
	return x
}

// setProcessorInfo sets x's processor and boot modes: arm64 boots UEFI
// only, x86_64 legacy BIOS or UEFI.
func setProcessorInfo(x *xmlInstanceType, it catalog.InstanceType, arch string) {
	x.ProcessorInfo = xmlProcessorInfo{SupportedArchitectures: []string{arch},
		SustainedClockSpeedInGhz: float64(labelInt(it, "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz")) / 1000,
		Manufacturer:             map[string]string{"intel": "Intel", "amd": "AMD", "aws": "AWS"}[it.Labels["karpenter.k8s.aws/instance-cpu-manufacturer"]]}
	if arch == "arm64" {
		x.SupportedBootModes = []string{"uefi"}
	} else {
		x.SupportedBootModes = []string{"legacy-bios", "uefi"}
	}
}

// setStorageInfo sets x's local NVMe instance storage (GB) and EBS info
// (bandwidth in Mbps, throughput in MB/s, 4 IOPS per Mbps); nitroOrMetal
// types are EBS-optimised by default and need NVMe.
func setStorageInfo(x *xmlInstanceType, it catalog.InstanceType, nitroOrMetal bool) {
	if nvme := labelInt(it, "karpenter.k8s.aws/instance-local-nvme"); nvme > 0 {
		x.InstanceStorageSupported = true
		x.InstanceStorageInfo = &xmlStorageInfo{TotalSizeInGB: nvme, Disks: []xmlDisk{{SizeInGB: nvme, Count: 1, Type: "ssd"}}, NvmeSupport: "required"}
	}
	ebsMbps := labelInt(it, "karpenter.k8s.aws/instance-ebs-bandwidth")
	x.EbsInfo = xmlEBSInfo{EbsOptimizedSupport: "supported", EncryptionSupport: "supported", NvmeSupport: "unsupported"}
	if nitroOrMetal {
		x.EbsInfo.EbsOptimizedSupport, x.EbsInfo.NvmeSupport = "default", "required"
	}
	if ebsMbps > 0 {
		x.EbsInfo.EbsOptimizedInfo = &xmlEBSOptimized{BaselineBandwidthInMbps: ebsMbps, MaximumBandwidthInMbps: ebsMbps,
			BaselineThroughputInMBps: float64(ebsMbps) / 8, MaximumThroughputInMBps: float64(ebsMbps) / 8,
			BaselineIops: ebsMbps * 4, MaximumIops: ebsMbps * 4}
	}
}

// setNetworkInfo sets x's network: bandwidth, ENI and per-ENI IP limits
// derived from the pod capacity, EFA; nitroOrMetal types require ENA.
func setNetworkInfo(x *xmlInstanceType, it catalog.InstanceType, nitroOrMetal bool) {
	netMbps := labelInt(it, "karpenter.k8s.aws/instance-network-bandwidth")
	enis, ips := eniLimits(allocInt(it, corev1.ResourcePods))
	x.NetworkInfo = xmlNetworkInfo{
		NetworkPerformance: networkPerformance(netMbps), MaximumNetworkInterfaces: enis, MaximumNetworkCards: 1,
		NetworkCards: []xmlNetworkCard{{NetworkPerformance: networkPerformance(netMbps), MaximumNetworkInterfaces: enis,
			BaselineBandwidthInGbps: gbps(netMbps), PeakBandwidthInGbps: gbps(netMbps)}},
		Ipv4AddressesPerInterface: ips, Ipv6AddressesPerInterface: ips, Ipv6Supported: true, EnaSupport: "supported",
		EncryptionInTransitSupported: it.Labels["karpenter.k8s.aws/instance-encryption-in-transit-supported"] == "true",
	}
	if nitroOrMetal {
		x.NetworkInfo.EnaSupport = "required"
	}
	if efa := allocInt(it, "vpc.amazonaws.com/efa"); efa > 0 {
		x.NetworkInfo.EfaSupported = true
		x.NetworkInfo.EfaInfo = &xmlEFAInfo{MaximumEfaInterfaces: efa}
	}
}

// gpuInfo is the type's GPUs (memory per GPU in MiB), nil without GPUs.
func gpuInfo(it catalog.InstanceType) *xmlGPUInfo {
	n := it.GPUCount()
	if n <= 0 {
		return nil
	}
	mem := labelInt(it, "karpenter.k8s.aws/instance-gpu-memory")
	name := it.Labels[catalog.LabelInstanceGPUName]
	manu := strings.ToUpper(it.Labels["karpenter.k8s.aws/instance-gpu-manufacturer"])
	if manu == "NVIDIA" {
		name = strings.ToUpper(name)
	}
	return &xmlGPUInfo{Gpus: []xmlGPUDevice{{Name: name, Manufacturer: manu, Count: n, MemoryInfo: xmlSizeMiB{SizeInMiB: mem}}},
		TotalGpuMemoryInMiB: n * mem}
}

// neuronInfo is the type's AWS Neuron devices (Inferentia, Trainium),
// nil without any: device count from the aws.amazon.com/neuron resource,
// cores per device from aws.amazon.com/neuroncore, and per accelerator
// name the device name, memory per device (MiB) and NeuronCore version.
func neuronInfo(it catalog.InstanceType) *xmlNeuronInfo {
	devs := allocInt(it, "aws.amazon.com/neuron")
	if devs <= 0 {
		return nil
	}
	name, mem, version := "Inferentia", int64(8192), int64(1)
	switch it.Labels["karpenter.k8s.aws/instance-accelerator-name"] {
	case "inferentia2":
		name, mem, version = "Inferentia2", 32768, 2
	case "trainium":
		name, mem, version = "Trainium", 32768, 2
	case "trainium2":
		name, mem, version = "Trainium2", 98304, 3
	}
	cores := allocInt(it, "aws.amazon.com/neuroncore") / devs
	return &xmlNeuronInfo{NeuronDevices: []xmlNeuronDevice{{Count: devs, Name: name,
		CoreInfo: xmlNeuronCore{Count: cores, Version: version}, MemoryInfo: xmlSizeMiB{SizeInMiB: mem}}},
		TotalNeuronDeviceMemoryInMiB: devs * mem}
}

var (
	typeInfosOnce sync.Once
	typeInfos     []xmlInstanceType
	typeInfoIndex map[string]int
)

// allTypeInfos renders the catalogue once; the result is shared read-only.
func allTypeInfos() []xmlInstanceType {
	typeInfosOnce.Do(func() {
		all := catalog.All()
		typeInfos = make([]xmlInstanceType, 0, len(all))
		typeInfoIndex = make(map[string]int, len(all))
		for i, it := range all {
			typeInfos = append(typeInfos, instanceTypeInfo(it))
			typeInfoIndex[it.Name] = i
		}
	})
	return typeInfos
}

// typeInfo returns the rendered InstanceTypeInfo of a catalogue type.
func typeInfo(name string) (xmlInstanceType, bool) {
	all := allTypeInfos()
	i, ok := typeInfoIndex[name]
	if !ok {
		return xmlInstanceType{}, false
	}
	return all[i], true
}

func typeInfoField(x xmlInstanceType, name string) ([]string, bool) {
	b := strconv.FormatBool
	switch name {
	case "instance-type":
		return one(x.InstanceType), true
	case "current-generation":
		return one(b(x.CurrentGeneration)), true
	case "free-tier-eligible":
		return one(b(x.FreeTierEligible)), true
	case "bare-metal":
		return one(b(x.BareMetal)), true
	case "hypervisor":
		return one(x.Hypervisor), true
	case "processor-info.supported-architecture":
		return x.ProcessorInfo.SupportedArchitectures, true
	case "supported-usage-class":
		return x.SupportedUsageClasses, true
	case "supported-root-device-type":
		return x.SupportedRootDeviceTypes, true
	case "supported-virtualization-type":
		return x.SupportedVirtualizationTypes, true
	case "supported-boot-mode":
		return x.SupportedBootModes, true
	case "vcpu-info.default-vcpus":
		return one(strconv.FormatInt(x.VCpuInfo.DefaultVCpus, 10)), true
	case "memory-info.size-in-mib":
		return one(strconv.FormatInt(x.MemoryInfo.SizeInMiB, 10)), true
	case "burstable-performance-supported":
		return one(b(x.BurstablePerformanceSupported)), true
	case "instance-storage-supported":
		return one(b(x.InstanceStorageSupported)), true
	case "network-info.efa-supported":
		return one(b(x.NetworkInfo.EfaSupported)), true
	case "network-info.ena-support":
		return one(x.NetworkInfo.EnaSupport), true
	}
	return nil, false
}

type describeInstanceTypesResponse struct {
	respMeta
	InstanceTypes []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

func (s *Simulator) describeInstanceTypes(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlInstanceType{}, typeInfoField)
	if err != nil {
		return nil, err
	}
	names := req.p.list("InstanceType")
	var unknown []string
	for _, n := range names {
		if _, ok := catalog.Get(n); !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, newError("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", quoteList(unknown))
	}
	// EC2 pages DescribeInstanceTypes at 100 items even without MaxResults.
	offset, size, perr := req.p.pageRange(5, 100, 100)
	if perr != nil {
		return nil, perr
	}
	m := matching[xmlInstanceType]{fs: fs, field: typeInfoField}
	for _, x := range allTypeInfos() {
		if len(names) > 0 && !contains(names, x.InstanceType) {
			continue
		}
		m.add(x, nil)
	}
	return answer(&m, offset, size, func(page []xmlInstanceType, next string) any {
		return &describeInstanceTypesResponse{InstanceTypes: page, NextToken: next}
	})
}
