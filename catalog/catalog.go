package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Well-known label keys carried by every catalogue entry. Source: Karpenter
// v1 well-known labels (karpenter.sh, karpenter.k8s.aws) and Kubernetes'
// node labels.
const (
	LabelInstanceType     = corev1.LabelInstanceTypeStable        // node.kubernetes.io/instance-type
	LabelArch             = corev1.LabelArchStable                // kubernetes.io/arch
	LabelOS               = corev1.LabelOSStable                  // kubernetes.io/os
	LabelInstanceCPU      = "karpenter.k8s.aws/instance-cpu"      // vCPUs, integer
	LabelInstanceMemory   = "karpenter.k8s.aws/instance-memory"   // MiB, integer
	LabelInstanceFamily   = "karpenter.k8s.aws/instance-family"   // e.g. "m5"
	LabelInstanceCategory = "karpenter.k8s.aws/instance-category" // e.g. "m"
	LabelInstanceGPUCount = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUName  = "karpenter.k8s.aws/instance-gpu-name"
)

//go:embed aws-instance-types.json
var raw []byte

// InstanceType is one EC2 instance type as the catalogue records it.
type InstanceType struct {
	// Name is the EC2 instance type, for example "m5.large".
	Name string
	// Labels are the node labels a node of this type carries
	// (karpenter.k8s.aws/instance-*, kubernetes.io/arch, kubernetes.io/os,
	// node.kubernetes.io/instance-type). Never modify: it is shared.
	Labels map[string]string
	// Allocatable is what a node of this type offers to pods (cpu in
	// millicores, memory in bytes, pods, ephemeral-storage, and extended
	// resources such as nvidia.com/gpu), assuming AL2023 and default volumes.
	Allocatable corev1.ResourceList
	// OnDemandPriceUSDPerHour is the us-east-1 Linux on-demand price in USD
	// per hour; nil where the source has none (18 types).
	OnDemandPriceUSDPerHour *float64
}

// VCPUs returns the vCPU count from the karpenter.k8s.aws/instance-cpu label, or 0.
func (it InstanceType) VCPUs() int64 { return it.intLabel(LabelInstanceCPU) }

// MemoryMiB returns the memory in MiB from the karpenter.k8s.aws/instance-memory label, or 0.
func (it InstanceType) MemoryMiB() int64 { return it.intLabel(LabelInstanceMemory) }

// GPUCount returns the number of GPUs from karpenter.k8s.aws/instance-gpu-count, or 0.
func (it InstanceType) GPUCount() int64 { return it.intLabel(LabelInstanceGPUCount) }

// Arch returns the kubernetes.io/arch label ("amd64" or "arm64").
func (it InstanceType) Arch() string { return it.Labels[LabelArch] }

// Capacity returns the node capacity of this type: cpu from the vCPU count,
// memory from the instance memory (MiB), and every other resource as in
// Allocatable. Kubelet reports it as status.capacity.
func (it InstanceType) Capacity() corev1.ResourceList {
	c := it.Allocatable.DeepCopy()
	if v := it.VCPUs(); v > 0 {
		c[corev1.ResourceCPU] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	if m := it.MemoryMiB(); m > 0 {
		c[corev1.ResourceMemory] = *resource.NewQuantity(m*1024*1024, resource.BinarySI)
	}
	return c
}

func (it InstanceType) intLabel(key string) int64 {
	v, err := strconv.ParseInt(it.Labels[key], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// SourceNote says where the catalogue data comes from.
type SourceNote struct {
	Repository string   `json:"repository"`
	Commit     string   `json:"commit"`
	Files      []string `json:"files"`
	Notes      string   `json:"notes"`
}

type file struct {
	Source        SourceNote `json:"source"`
	InstanceTypes []struct {
		Name                    string            `json:"name"`
		Labels                  map[string]string `json:"labels"`
		Allocatable             map[string]string `json:"allocatable"`
		OnDemandPriceUSDPerHour *float64          `json:"onDemandPriceUSDPerHour"`
	} `json:"instanceTypes"`
}

var (
	loadOnce sync.Once
	all      []InstanceType
	byName   map[string]int
	source   SourceNote
	loadErr  error
)

func load() {
	var f file
	if loadErr = json.Unmarshal(raw, &f); loadErr != nil {
		loadErr = fmt.Errorf("catalog: decoding embedded aws-instance-types.json: %w", loadErr)
		return
	}
	source = f.Source
	all = make([]InstanceType, 0, len(f.InstanceTypes))
	byName = make(map[string]int, len(f.InstanceTypes))
	for _, e := range f.InstanceTypes {
		alloc := corev1.ResourceList{}
		for k, v := range e.Allocatable {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				loadErr = fmt.Errorf("catalog: instance type %s: allocatable %s=%q: %w", e.Name, k, v, err)
				return
			}
			alloc[corev1.ResourceName(k)] = q
		}
		all = append(all, InstanceType{Name: e.Name, Labels: e.Labels, Allocatable: alloc, OnDemandPriceUSDPerHour: e.OnDemandPriceUSDPerHour})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for i, it := range all {
		byName[it.Name] = i
	}
}

func mustLoad() {
	loadOnce.Do(load)
	if loadErr != nil {
		// The data is embedded at build time and checked by the package
		// tests, so this can only happen on a corrupted build.
		panic(loadErr)
	}
}

// All returns every instance type, sorted by name. The slice is a fresh copy;
// the Labels and Allocatable values inside are shared and must not be modified.
func All() []InstanceType {
	mustLoad()
	out := make([]InstanceType, len(all))
	copy(out, all)
	return out
}

// Get returns the instance type with the given name and whether it exists.
func Get(name string) (InstanceType, bool) {
	mustLoad()
	i, ok := byName[name]
	if !ok {
		return InstanceType{}, false
	}
	return all[i], true
}

// Len returns the number of instance types in the catalogue (1,363).
func Len() int {
	mustLoad()
	return len(all)
}

// Source returns the provenance of the embedded data.
func Source() SourceNote {
	mustLoad()
	return source
}
