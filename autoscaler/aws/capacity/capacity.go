package capacity

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	v1 "github.com/karpx/karpx/apis/v1"
)

// ObservedTTL is how long an observed allocatable is trusted. Source:
// Karpenter's DiscoveredCapacityCacheTTL (60 days): what an AMI reserves
// changes only with a new AMI, which is a new key.
const ObservedTTL = 60 * 24 * time.Hour

// Entries is the cache size: one entry per (instance type, AMI) in use,
// far below this in any cluster.
const Entries = 4096

// HandlerPath is where Handler is served on the metrics address.
const HandlerPath = "/capacity"

// Key is an (instance type, AMI) pair.
type Key struct {
	// InstanceType is the EC2 instance type, for example "m5.large".
	InstanceType string `json:"instanceType"`
	// AMIID is the image, for example "ami-0123456789abcdef0".
	AMIID string `json:"amiID"`
}

// Observation is a registered Node's allocatable.
type Observation struct {
	// Allocatable is the Node's status.allocatable.
	Allocatable corev1.ResourceList `json:"allocatable"`
	// At is when it was recorded.
	At time.Time `json:"at"`
	// Node is the Node it was read from.
	Node string `json:"node"`
}

// Entry is one key's estimate and, once a Node registered, observation.
type Entry struct {
	Key
	// Estimate is the last estimate computed for the key.
	Estimate corev1.ResourceList `json:"estimate"`
	// Observed is nil until a Node of the key registered.
	Observed *Observation `json:"observed,omitempty"`
}

// Cache holds observed allocatable per Key, and the last estimate per key
// for display. It is safe for concurrent use.
type Cache struct {
	observed  *expirable.LRU[Key, Observation]
	mu        sync.Mutex
	estimates map[Key]corev1.ResourceList
	clk       clock.PassiveClock
}

// New returns an empty Cache that plans with what Nodes of each key
// reported once one registered (problem P3).
func New() *Cache {
	return &Cache{observed: expirable.NewLRU[Key, Observation](Entries, nil, ObservedTTL),
		estimates: map[Key]corev1.ResourceList{}, clk: clock.RealClock{}}
}

// Allocatable returns what pods can request on a node of key: the observed
// allocatable when a Node of key registered, else
// estimate, which the caller computes with Estimate.
func (c *Cache) Allocatable(key Key, estimate corev1.ResourceList) corev1.ResourceList {
	c.mu.Lock()
	if len(c.estimates) < Entries {
		c.estimates[key] = estimate
	}
	c.mu.Unlock()
	if o, ok := c.observed.Get(key); ok {
		return o.Allocatable
	}
	return estimate
}

// Observe records a registered Node's allocatable for key.
func (c *Cache) Observe(key Key, node string, allocatable corev1.ResourceList) {
	c.observed.Add(key, Observation{Allocatable: allocatable.DeepCopy(), At: c.clk.Now(), Node: node})
}

// Entries returns every key with an estimate or an observation, sorted.
func (c *Cache) Entries() []Entry {
	c.mu.Lock()
	byKey := map[Key]*Entry{}
	for k, e := range c.estimates {
		byKey[k] = &Entry{Key: k, Estimate: e}
	}
	c.mu.Unlock()
	for _, k := range c.observed.Keys() {
		o, ok := c.observed.Peek(k)
		if !ok {
			continue
		}
		e := byKey[k]
		if e == nil {
			e = &Entry{Key: k}
			byKey[k] = e
		}
		e.Observed = &o
	}
	out := make([]Entry, 0, len(byKey))
	for _, e := range byKey {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].AMIID < out[j].AMIID
	})
	return out
}

// Report is Handler's JSON document.
type Report struct {
	// Learning is always true: observations are always used. It stays
	// in the document because kubectl karpx capacity of earlier releases
	// warns when it is false or missing (their controllers had a
	// --capacity-learning switch).
	Learning bool    `json:"learning"`
	Entries  []Entry `json:"entries"`
}

// Handler serves Entries as JSON.
func (c *Cache) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Report{Learning: true, Entries: c.Entries()})
	})
}

// Default reservations behind the catalogue's allocatable, which Estimate
// replaces with spec.kubelet's. Source: the EKS-optimized AMIs' bootstrap
// and Karpenter's instancetype.go: kube-reserved memory 11 MiB per pod +
// 255 MiB, kube-reserved cpu 6% of the first core, 1% of the second, 0.5%
// of the third and fourth and 0.25% of the rest, no system-reserved, and a
// hard eviction threshold memory.available of 100Mi. The catalogue also
// subtracts the VM memory overhead (7.5% of memory, Karpenter's
// VM_MEMORY_OVERHEAD_PERCENT default); it is already in its values and
// Estimate keeps it.
const (
	defaultEvictionMiB     = 100
	kubeReservedMiBPerPod  = 11
	kubeReservedMiBPerNode = 255
)

// Estimate returns the allocatable of a node with catalogue allocatable
// catalogAlloc and vcpus vCPUs under kubelet (nil: defaults):
//
//	pods   = min(maxPods, podsPerCore × vcpus) when set, else the catalogue's pods
//	cpu    = catalogue cpu + defaultKubeReservedCPU(vcpus) − kubeReserved.cpu (default: the same) − systemReserved.cpu
//	memory = catalogue memory + (11·catPods + 255) MiB + 100 MiB
//	         − kubeReserved.memory (default 11·pods + 255 MiB) − systemReserved.memory
//	         − evictionHard["memory.available"] (default 100Mi; a percentage is of the catalogue memory)
//	ephemeral-storage = catalogue − kubeReserved/systemReserved ephemeral-storage
//
// so that with no spec.kubelet it is the catalogue's allocatable (the same
// list, which callers must not modify). Values never go below zero.
func Estimate(catalogAlloc corev1.ResourceList, vcpus int64, kubelet *v1.KubeletConfiguration) corev1.ResourceList {
	if kubelet == nil {
		return catalogAlloc // shared, as the catalogue's: never modified
	}
	out := catalogAlloc.DeepCopy()
	catPods := catalogAlloc.Pods().Value()
	pods := catPods
	if kubelet.MaxPods != nil {
		pods = int64(*kubelet.MaxPods)
	}
	if kubelet.PodsPerCore != nil && *kubelet.PodsPerCore > 0 && vcpus > 0 {
		pods = min(pods, int64(*kubelet.PodsPerCore)*vcpus)
	}
	out[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)

	cpu := catalogAlloc.Cpu().MilliValue()
	if q, ok := quantity(kubelet.KubeReserved, "cpu"); ok {
		cpu += DefaultKubeReservedMilliCPU(vcpus) - q.MilliValue()
	}
	if q, ok := quantity(kubelet.SystemReserved, "cpu"); ok {
		cpu -= q.MilliValue()
	}
	out[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(cpu, 0), resource.DecimalSI)

	const mi = 1024 * 1024
	catMem := catalogAlloc.Memory().Value()
	mem := catMem + (kubeReservedMiBPerPod*catPods+kubeReservedMiBPerNode+defaultEvictionMiB)*mi
	if q, ok := quantity(kubelet.KubeReserved, "memory"); ok {
		mem -= q.Value()
	} else {
		mem -= (kubeReservedMiBPerPod*pods + kubeReservedMiBPerNode) * mi
	}
	if q, ok := quantity(kubelet.SystemReserved, "memory"); ok {
		mem -= q.Value()
	}
	mem -= evictionBytes(kubelet.EvictionHard, catMem)
	out[corev1.ResourceMemory] = *resource.NewQuantity(max(mem, 0), resource.BinarySI)

	if eph, ok := out[corev1.ResourceEphemeralStorage]; ok {
		v := eph.Value()
		for _, m := range []map[string]string{kubelet.KubeReserved, kubelet.SystemReserved} {
			if q, ok := quantity(m, "ephemeral-storage"); ok {
				v -= q.Value()
			}
		}
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(max(v, 0), resource.BinarySI)
	}
	return out
}

// quantity parses m[key]; unparsable values count as unset (the webhook
// rejects them before they get here).
func quantity(m map[string]string, key string) (resource.Quantity, bool) {
	s, ok := m[key]
	if !ok {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// evictionBytes is the memory.available hard threshold in bytes: a
// quantity, or a percentage of memBytes; default 100Mi.
func evictionBytes(thresholds map[string]string, memBytes int64) int64 {
	s, ok := thresholds["memory.available"]
	if !ok {
		return defaultEvictionMiB * 1024 * 1024
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		var pct float64
		if err := json.Unmarshal([]byte(p), &pct); err == nil {
			return int64(float64(memBytes) * pct / 100)
		}
		return defaultEvictionMiB * 1024 * 1024
	}
	if q, err := resource.ParseQuantity(s); err == nil {
		return q.Value()
	}
	return defaultEvictionMiB * 1024 * 1024
}

// DefaultKubeReservedMilliCPU is the EKS kube-reserved cpu in millicores:
// 6% of the first core, 1% of the second, 0.5% of the third and fourth,
// 0.25% of every further core.
func DefaultKubeReservedMilliCPU(vcpus int64) int64 {
	var m float64
	for i := int64(0); i < vcpus; i++ {
		switch {
		case i == 0:
			m += 60
		case i == 1:
			m += 10
		case i < 4:
			m += 5
		default:
			m += 2.5
		}
	}
	return int64(m)
}
