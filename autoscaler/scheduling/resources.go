package scheduling

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// resourceNodes is the pseudo-resource a NodePool limit uses to cap its node
// count (spec.limits.nodes); every new node counts 1 against it.
const resourceNodes corev1.ResourceName = "nodes"

// dims numbers the resources one Solve call deals with, so that requests and
// allocatable become fixed-length vectors and a fit check is a loop over
// int64s instead of map lookups on resource.Quantity.
type dims struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

func newDims() *dims { return &dims{index: map[corev1.ResourceName]int{}} }

// add registers every resource named in rl.
func (d *dims) add(rl corev1.ResourceList) {
	names := make([]string, 0, len(rl))
	for name := range rl {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := d.index[corev1.ResourceName(name)]; !ok {
			d.index[corev1.ResourceName(name)] = len(d.names)
			d.names = append(d.names, corev1.ResourceName(name))
		}
	}
}

// vector converts rl to the units of vector: millicores for cpu, whole
// units rounded up for everything else (bytes for memory and storage, a
// count for pods and extended resources). Amounts beyond maxAmount (more
// than any machine has, e.g. memory: 9Ei) saturate to maxAmount, so sums
// never overflow. Resources rl lacks are zero; resources not registered
// with add are dropped.
func (d *dims) vector(rl corev1.ResourceList) vector {
	v := make(vector, len(d.names))
	for name, q := range rl {
		if i, ok := d.index[name]; ok {
			v[i] = amount(name, q)
		}
	}
	return v
}

// maxAmount is the largest amount a vector holds: 2^62 (4Ei of memory in
// bytes, 4.6e15 cores in millicores). Any larger quantity is absurd for a
// node, and keeping amounts at most 2^62 lets two of them be added without
// overflowing int64.
const maxAmount int64 = 1 << 62

// maxQuantity is maxAmount as a Quantity, in millicores (for cpu) and in
// whole units (for everything else).
var (
	maxMilliQuantity = resource.NewScaledQuantity(maxAmount, resource.Milli)
	maxUnitQuantity  = resource.NewQuantity(maxAmount, resource.DecimalSI)
)

// amount converts q to the units of vector for resource name, saturating
// at maxAmount (negative quantities become 0).
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	scale, limit := resource.Scale(0), maxUnitQuantity
	if name == corev1.ResourceCPU {
		scale, limit = resource.Milli, maxMilliQuantity
	}
	if q.Cmp(*limit) >= 0 {
		return maxAmount
	}
	return q.ScaledValue(scale)
}

// format renders v for error messages, e.g. "cpu=500m, memory=512Mi, pods=1",
// leaving out zeros.
func (d *dims) format(v vector) string {
	var parts []string
	for i, name := range d.names {
		if v[i] == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s", name, quantity(name, v[i]).String()))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// quantity turns an amount in the units of vector back into a Quantity, in
// the format kubectl shows for that resource.
func quantity(name corev1.ResourceName, v int64) *resource.Quantity {
	if name == corev1.ResourceCPU {
		return resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	format := resource.DecimalSI
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
		format = resource.BinarySI
	}
	return resource.NewQuantity(v, format)
}

// vector is a list of resource amounts indexed by dims: cpu in millicores,
// other resources in whole units (bytes, counts), each at most maxAmount.
type vector []int64

// plus returns v + o, saturating at maxAmount.
func (v vector) plus(o vector) vector {
	out := make(vector, len(v))
	for i := range v {
		out[i] = min(v[i]+o[i], maxAmount)
	}
	return out
}

// minus returns v - o.
func (v vector) minus(o vector) vector {
	out := make(vector, len(v))
	for i := range v {
		out[i] = v[i] - o[i]
	}
	return out
}

// fitsIn reports whether v <= o in every dimension.
func (v vector) fitsIn(o vector) bool {
	for i := range v {
		if v[i] > o[i] {
			return false
		}
	}
	return true
}

// fitsInLimited reports whether v <= o in every dimension where limited is
// true (the resources a NodePool limit caps).
func (v vector) fitsInLimited(o vector, limited []bool) bool {
	for i := range v {
		if limited[i] && v[i] > o[i] {
			return false
		}
	}
	return true
}

// podRequests returns what a pod needs on a node: the Kubernetes effective
// requests (the sum of app and sidecar containers, max'd with each init
// container, plus pod overhead; pod-level resources when set) as computed by
// k8s.io/component-helpers/resource.PodRequests, and pods=1.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	rl := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	rl[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return rl
}

// addResourceLists returns the sum of the lists.
func addResourceLists(lists ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, rl := range lists {
		for name, q := range rl {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}
