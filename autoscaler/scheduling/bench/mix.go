package bench

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/catalog"
)

// Request sizes of the mix, as in Karpenter's benchmark: cpu in
// millicores, memory in MiB, each drawn uniformly.
var (
	cpuMillis = []int{100, 250, 500, 1000, 1500}
	memoryMiB = []int{100, 256, 512, 1024, 2048, 4096}
	// labelValues are the values of the random my-label and my-affinity
	// labels (seven, as in Karpenter's benchmark).
	labelValues = []string{"a", "b", "c", "d", "e", "f", "g"}
)

// HeadToHeadInstanceTypes are the instance types test/headtohead's
// NodePool allows (and BenchmarkSchedulingInPasses plans on): the m5, c5
// and r5 families from large to 4xlarge, general purpose, compute and
// memory optimised, each with a catalogue on-demand price. A short list
// keeps both schedulers' work comparable with what a user's NodePool
// usually allows; Karpenter's kwok provider knows only the types in its
// instance-types file, which is generated from the same catalogue.
var HeadToHeadInstanceTypes = []string{
	"m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge",
	"c5.large", "c5.xlarge", "c5.2xlarge", "c5.4xlarge",
	"r5.large", "r5.xlarge", "r5.2xlarge", "r5.4xlarge",
}

// DiversePods returns n pods in Karpenter's benchmark mix, deterministic
// for a seed: a fifth each of generic pods, zone topology spread (maxSkew
// 1, DoNotSchedule, a random my-label selector), hostname topology spread
// (same), zone pod affinity to pods with their own random my-affinity
// label, and hostname pod anti-affinity among all app=nginx pods; the
// remainder generic. Every pod but the affinity ones carries a random
// my-label, so the spread selectors count generic pods too.
func DiversePods(n int, seed int64) []*corev1.Pod {
	r := rand.New(rand.NewSource(seed))
	var out []*corev1.Pod
	add := func(kind string, f func(p *corev1.Pod)) {
		i := len(out)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%05d", kind, i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%05d", i)),
				Labels: map[string]string{"my-label": labelValues[r.Intn(len(labelValues))]},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(cpuMillis[r.Intn(len(cpuMillis))]), resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", memoryMiB[r.Intn(len(memoryMiB))])),
			}}}}},
		}
		if f != nil {
			f(p)
		}
		out = append(out, p)
	}
	spread := func(key string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"my-label": labelValues[r.Intn(len(labelValues))]}},
			}}
		}
	}
	each := n / 5
	for range each {
		add("generic", nil)
	}
	for range each {
		add("zone-spread", spread(corev1.LabelTopologyZone))
	}
	for range each {
		add("host-spread", spread(corev1.LabelHostname))
	}
	for range each {
		add("zone-affinity", func(p *corev1.Pod) {
			l := map[string]string{"my-affinity": labelValues[r.Intn(len(labelValues))]}
			p.Labels = l
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: corev1.LabelTopologyZone,
			}}}}
		})
	}
	for range each {
		add("host-anti-affinity", func(p *corev1.Pod) {
			l := map[string]string{"app": "nginx"}
			p.Labels = l
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: corev1.LabelHostname,
			}}}}
		})
	}
	for len(out) < n {
		add("generic", nil)
	}
	return out
}

// syntheticOverhead is what Karpenter's fake instance types reserve for
// the kubelet (KubeReserved 100m cpu, 10Mi memory).
var syntheticOverhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")}

// SyntheticInstanceTypes returns n instance types shaped like Karpenter's
// fake.InstanceTypes(n): type i has i+1 vCPUs, 2(i+1) GiB of memory and
// 10(i+1) pods, allocatable minus 100m cpu and 10Mi memory, amd64 linux,
// spot in test-zone-1 and test-zone-2 and on-demand in test-zone-1..3, all
// at Karpenter's fake price of $0.1 per vCPU plus $0.1 per GB (10^9
// bytes) of memory per hour.
func SyntheticInstanceTypes(n int) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, n)
	for i := range out {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(i+1), resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 2*(i+1))),
			corev1.ResourcePods:   *resource.NewQuantity(int64(10*(i+1)), resource.DecimalSI),
		}
		allocatable := capacity.DeepCopy()
		for name, q := range syntheticOverhead {
			a := allocatable[name]
			a.Sub(q)
			allocatable[name] = a
		}
		mem := capacity[corev1.ResourceMemory]
		price := 0.1*float64(i+1) + 0.1*mem.AsApproximateFloat64()/1e9
		it := &cloudprovider.InstanceType{
			Name:        fmt.Sprintf("fake-it-%d", i),
			Labels:      map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			Capacity:    capacity,
			Allocatable: allocatable,
		}
		for _, o := range [][2]string{{"spot", "test-zone-1"}, {"spot", "test-zone-2"}, {"on-demand", "test-zone-1"}, {"on-demand", "test-zone-2"}, {"on-demand", "test-zone-3"}} {
			it.Offerings = append(it.Offerings, cloudprovider.Offering{CapacityType: o[0], Zone: o[1], PriceUSDPerHour: price, Available: true})
		}
		out[i] = it
	}
	return out
}

// CatalogInstanceTypes returns the 1,363 types of the EC2 catalogue,
// offered in us-east-1a/b/c on-demand at the catalogue price and spot at
// 35%, 36% and 37% of it. Types without a catalogue price get no
// offerings (Solve drops them).
func CatalogInstanceTypes() []*cloudprovider.InstanceType {
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	spot := []float64{0.35, 0.36, 0.37}
	var out []*cloudprovider.InstanceType
	for _, c := range catalog.All() {
		it := &cloudprovider.InstanceType{Name: c.Name, Labels: c.Labels, Capacity: c.Capacity(), Allocatable: c.Allocatable}
		if c.OnDemandPriceUSDPerHour != nil {
			for i, z := range zones {
				it.Offerings = append(it.Offerings,
					cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, PriceUSDPerHour: *c.OnDemandPriceUSDPerHour, Available: true},
					cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, PriceUSDPerHour: *c.OnDemandPriceUSDPerHour * spot[i], Available: true})
			}
		}
		out = append(out, it)
	}
	return out
}

// NodePool returns the benchmark's NodePool: no requirements (every type,
// zone and capacity type) and limits of 10,000,000 cpu and 10,000,000Gi
// memory, as Karpenter's benchmark sets.
func NodePool() scheduling.NodePoolInput {
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-default"},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			}},
			Limits: karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")},
		},
	}
	return scheduling.NodePoolInput{NodePool: np, Remaining: corev1.ResourceList(np.Spec.Limits)}
}

// TotalPrice returns the sum of the plans' prices in USD per hour.
func TotalPrice(res scheduling.Result) float64 {
	total := 0.0
	for _, p := range res.NewNodeClaims {
		total += p.PriceUSDPerHour
	}
	return total
}
