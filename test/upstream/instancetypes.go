package upstream

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/ec2sim"
)

// Karpenter's kwok provider subtracts a fixed kube-reserved of 100m CPU and
// 10Mi memory from an instance type's resources to get its allocatable
// (newInstanceType in sigs.k8s.io/karpenter/kwok/cloudprovider/helpers.go,
// v1.13.0), and the Nodes it creates report that allocatable. InstanceTypes
// adds them back so that Karpenter's Nodes offer pods exactly the
// catalogue's allocatable, as ec2sim's do.
var (
	kwokKubeReservedCPU    = resource.MustParse("100m")
	kwokKubeReservedMemory = resource.MustParse("10Mi")
)

// builtinLabels are catalogue labels Karpenter's kwok provider derives
// itself (instance type, architecture, operating system); InstanceTypes
// never carries them as offering requirements.
var builtinLabels = []string{catalog.LabelInstanceType, catalog.LabelArch, catalog.LabelOS}

// InstanceTypes renders karpx's catalogue as Karpenter's kwok instance
// types (the --instance-types-file-path format, the JSON of
// []kwok.InstanceTypeOptions) as sim — an ec2sim configuration, defaults
// applied as ec2sim.New applies them — serves them:
//
//   - the same instance types: every catalogue type with an on-demand
//     price (karpx's instance-type provider drops the 18 without one, and
//     ec2sim ranks them last and serves no spot price for them);
//   - one on-demand and one spot offering per zone of sim.Zones where
//     sim.Offered offers the type (DescribeInstanceTypeOfferings), with
//     requirements karpenter.sh/capacity-type and topology.kubernetes.io/zone;
//   - prices in USD per hour: on-demand from the catalogue (what karpx's
//     provider prices and ec2sim's CreateFleet ranks by), spot as
//     DescribeSpotPriceHistory serves it for the type and zone
//     (ec2sim.SpotPrice rounded to the micro-dollar, "%.6f");
//   - resources: the catalogue's allocatable (cpu, memory, pods,
//     ephemeral-storage and extended resources such as nvidia.com/gpu)
//     plus the kwok provider's fixed 100m CPU and 10Mi kube-reserved, so
//     that Karpenter's allocatable, and its Nodes', equal ec2sim's Nodes';
//   - architecture from kubernetes.io/arch, operating system linux.
//
// labels are catalogue label keys (karpenter.k8s.aws/instance-family, …)
// to carry as offering requirements, which makes Karpenter accept NodePool
// requirements and pod selectors on them and put them on its Nodes; see
// RequirementLabels. Karpenter's kwok provider has no per-type labels of
// its own beyond instance type, arch, os and karpenter.kwok.sh/instance-*
// (which it derives from the name and resources), so each carried label
// costs it one requirement on every offering: carry only those the
// NodePools and pods select on.
//
// What cannot be carried over: the Node's status.capacity (Karpenter's kwok
// Nodes report allocatable plus 100m/10Mi, not the vCPUs and memory that
// ec2sim's report); the topology.k8s.aws/zone-id label; reserved (ODCR)
// offerings, which ec2sim does not simulate; everything ec2sim does at
// launch time — insufficient-capacity errors, throttling, fault injection,
// user-data behaviour markers, spot interruptions — since Karpenter's kwok
// provider launches every offering it is given; and the
// karpenter.kwok.sh/instance-cpu and instance-memory labels Karpenter
// derives, which read the resources above (e.g. "2030m"), not the vCPU
// count.
//
// It returns an error naming the field when sim is invalid (ec2sim.New's
// errors) or a label is not a catalogue label.
func InstanceTypes(sim ec2sim.Config, labels ...string) ([]kwok.InstanceTypeOptions, error) {
	s, err := ec2sim.New(sim)
	if err != nil {
		return nil, fmt.Errorf("instance types from ec2sim.Config: %w", err)
	}
	cfg := s.Config()
	known := map[string]bool{}
	for _, it := range catalog.All() {
		for k := range it.Labels {
			known[k] = true
		}
	}
	for _, l := range labels {
		if slices.Contains(builtinLabels, l) {
			return nil, fmt.Errorf("label %q: Karpenter's kwok provider sets it itself; leave it out", l)
		}
		if !known[l] {
			return nil, fmt.Errorf("label %q is not a catalogue label (see catalog.LabelInstanceFamily and the karpenter.k8s.aws/instance-* keys)", l)
		}
	}
	var out []kwok.InstanceTypeOptions
	for _, it := range catalog.All() {
		if it.OnDemandPriceUSDPerHour == nil {
			continue
		}
		opts := kwok.InstanceTypeOptions{
			Name:             it.Name,
			Architecture:     it.Arch(),
			OperatingSystems: []corev1.OSName{corev1.OSName(it.Labels[catalog.LabelOS])},
			Resources:        it.Allocatable.DeepCopy(),
		}
		for name, add := range map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: kwokKubeReservedCPU, corev1.ResourceMemory: kwokKubeReservedMemory} {
			q := opts.Resources[name]
			q.Add(add)
			opts.Resources[name] = q
		}
		var extra []corev1.NodeSelectorRequirement
		for _, l := range labels {
			if v, ok := it.Labels[l]; ok {
				extra = append(extra, corev1.NodeSelectorRequirement{Key: l, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
			}
		}
		for _, zone := range cfg.Zones {
			if cfg.Offered != nil && !cfg.Offered(it.Name, zone) {
				continue
			}
			spot, ok := ec2sim.SpotPrice(it.Name, zone)
			if !ok {
				return nil, fmt.Errorf("instance type %s: ec2sim has an on-demand price but no spot price in %s", it.Name, zone)
			}
			for _, o := range []struct {
				capacityType string
				price        float64
			}{{karpv1.CapacityTypeOnDemand, *it.OnDemandPriceUSDPerHour}, {karpv1.CapacityTypeSpot, servedPrice(spot)}} {
				reqs := append([]corev1.NodeSelectorRequirement{
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{o.capacityType}},
					{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
				}, extra...)
				opts.Offerings = append(opts.Offerings, kwok.KWOKOffering{
					Offering:     cloudprovider.Offering{Price: o.price, Available: true},
					Requirements: reqs,
				})
			}
		}
		if len(opts.Offerings) > 0 {
			out = append(out, opts)
		}
	}
	return out, nil
}

// servedPrice is price as ec2sim's DescribeSpotPriceHistory serves it: a
// decimal string with six places, parsed back.
func servedPrice(price float64) float64 {
	p, _ := strconv.ParseFloat(strconv.FormatFloat(price, 'f', 6, 64), 64)
	return p
}

// WriteInstanceTypes writes InstanceTypes(sim, labels...) to path as JSON,
// the file Karpenter's kwok provider reads with --instance-types-file-path.
// It returns InstanceTypes' errors and the file system's.
func WriteInstanceTypes(path string, sim ec2sim.Config, labels ...string) error {
	its, err := InstanceTypes(sim, labels...)
	if err != nil {
		return err
	}
	data, err := json.Marshal(its)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// RequirementLabels returns, sorted and without duplicates, the catalogue
// label keys (karpenter.k8s.aws/instance-*) that the requirements of pools'
// templates name: the labels InstanceTypes must carry for Karpenter to
// honour those NodePools as karpx does.
func RequirementLabels(pools ...*karpv1.NodePool) []string {
	known := map[string]bool{}
	for _, it := range catalog.All() {
		for k := range it.Labels {
			if !slices.Contains(builtinLabels, k) {
				known[k] = true
			}
		}
	}
	set := map[string]bool{}
	for _, np := range pools {
		for _, r := range np.Spec.Template.Spec.Requirements {
			if known[r.Key] {
				set[r.Key] = true
			}
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
