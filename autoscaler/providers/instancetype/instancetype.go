package instancetype

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/providers/ami"
	"github.com/karpx/karpx/autoscaler/providers/budget"
	"github.com/karpx/karpx/autoscaler/providers/cache"
	"github.com/karpx/karpx/autoscaler/providers/ec2api"
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

// Provider lists instance types and their offerings. It is safe for
// concurrent use.
type Provider struct {
	api         ec2api.API
	unavailable *UnavailableOfferings
	now         func() time.Time

	mu        sync.Mutex
	infoCache cache.Store[string, []Info]
	spotCache cache.Store[string, map[string]float64]
	// lastSpot is the last complete spot price answer, served while the
	// EC2 API budget refuses a speculative refresh.
	lastSpot map[string]float64
	zoneIDs  cache.Store[string, map[string]string]
}

// NewProvider returns a Provider over api that consults unavailable for
// offering availability.
func NewProvider(api ec2api.API, unavailable *UnavailableOfferings, ttls cache.TTLs) *Provider {
	return &Provider{
		api:         api,
		unavailable: unavailable,
		now:         time.Now,
		infoCache:   cache.New[string, []Info](1, ttls.InstanceTypes),
		spotCache:   cache.New[string, map[string]float64](1, ttls.SpotPrice),
		zoneIDs:     cache.New[string, map[string]string](1, ttls.InstanceTypes),
	}
}

// Unavailable returns the unavailable-offerings cache the Provider reads.
func (p *Provider) Unavailable() *UnavailableOfferings { return p.unavailable }

// List returns the instance types offered in at least one of zones, sorted
// by name, each with one Offering per (zone ∈ zones, capacity type) it is
// sold with. Types whose architecture karpx cannot boot (not amd64/arm64)
// are left out. Errors are EC2 Describe* failures.
func (p *Provider) List(ctx context.Context, zones []string) ([]*cloudprovider.InstanceType, error) {
	infos, err := p.infos(ctx)
	if err != nil {
		return nil, err
	}
	spot, err := p.spotPrices(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, z := range zones {
		want[z] = true
	}
	out := make([]*cloudprovider.InstanceType, 0, len(infos))
	for i := range infos {
		info := &infos[i]
		it := &cloudprovider.InstanceType{Name: info.Name, Labels: info.Labels, Capacity: info.Capacity, Allocatable: info.Allocatable}
		for _, zone := range info.Zones {
			if !want[zone] {
				continue
			}
			for _, ct := range info.CapacityTypes {
				price, ok := offeringPrice(info, ct, spot[info.Name+"/"+zone])
				if !ok {
					continue
				}
				it.Offerings = append(it.Offerings, cloudprovider.Offering{
					Zone: zone, CapacityType: ct, PriceUSDPerHour: price,
					Available: !p.unavailable.IsUnavailable(info.Name, zone, ct),
				})
			}
		}
		if len(it.Offerings) > 0 {
			out = append(out, it)
		}
	}
	return out, nil
}

// offeringPrice returns the hourly price of an offering; spot is the spot
// price reported for the type and zone (0 if none).
func offeringPrice(info *Info, capacityType string, spot float64) (float64, bool) {
	switch capacityType {
	case cloudprovider.CapacityTypeSpot:
		if spot > 0 {
			return spot, true
		}
		if info.OnDemandPriceUSDPerHour != nil {
			return *info.OnDemandPriceUSDPerHour, true
		}
	case cloudprovider.CapacityTypeOnDemand:
		if info.OnDemandPriceUSDPerHour != nil {
			return *info.OnDemandPriceUSDPerHour, true
		}
	}
	return 0, false
}

// ZoneIDs returns the zone-name → zone-ID map of the region
// (DescribeAvailabilityZones), cached for cache.InstanceTypesTTL.
func (p *Provider) ZoneIDs(ctx context.Context) (map[string]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.zoneIDs.Get(""); ok {
		return m, nil
	}
	out, err := p.api.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return nil, fmt.Errorf("describing availability zones: %w", err)
	}
	m := map[string]string{}
	for _, z := range out.AvailabilityZones {
		m[aws.ToString(z.ZoneName)] = aws.ToString(z.ZoneId)
	}
	p.zoneIDs.Add("", m)
	return m, nil
}

func (p *Provider) infos(ctx context.Context) ([]Info, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if infos, ok := p.infoCache.Get(""); ok {
		return infos, nil
	}
	zonesByType := map[string][]string{}
	offPager := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.api, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	for offPager.HasMorePages() {
		out, err := offPager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range out.InstanceTypeOfferings {
			name := string(o.InstanceType)
			zonesByType[name] = append(zonesByType[name], aws.ToString(o.Location))
		}
	}
	var infos []Info
	pager := ec2.NewDescribeInstanceTypesPaginator(p.api, &ec2.DescribeInstanceTypesInput{})
	for pager.HasMorePages() {
		out, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance types: %w", err)
		}
		for _, t := range out.InstanceTypes {
			info, ok := NewInfo(t)
			if !ok {
				continue
			}
			info.Zones = zonesByType[info.Name]
			sort.Strings(info.Zones)
			if len(info.Zones) > 0 {
				infos = append(infos, info)
			}
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	p.infoCache.Add("", infos)
	return infos, nil
}

// spotPrices returns "type/zone" → current Linux spot price in USD/hour.
func (p *Provider) spotPrices(ctx context.Context) (map[string]float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.spotCache.Get(""); ok {
		return m, nil
	}
	m := map[string]float64{}
	newest := map[string]time.Time{}
	// A price refresh is speculative: it only re-ranks offerings, so it
	// yields the EC2 API budget to launches and terminations, and when the
	// budget refuses it the last prices (or, before any, the on-demand
	// prices offeringPrice falls back to) are used until the next try.
	ctx = budget.WithPriority(ctx, budget.Speculative)
	pager := ec2.NewDescribeSpotPriceHistoryPaginator(p.api, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(p.now()),
	})
	for pager.HasMorePages() {
		out, err := pager.NextPage(ctx)
		if budget.IsExhausted(err) {
			if p.lastSpot == nil {
				return map[string]float64{}, nil
			}
			return p.lastSpot, nil
		}
		if err != nil {
			return nil, fmt.Errorf("describing spot price history: %w", err)
		}
		for _, sp := range out.SpotPriceHistory {
			price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil || price <= 0 {
				continue
			}
			key := string(sp.InstanceType) + "/" + aws.ToString(sp.AvailabilityZone)
			ts := aws.ToTime(sp.Timestamp)
			if _, seen := m[key]; !seen || ts.After(newest[key]) {
				m[key], newest[key] = price, ts
			}
		}
	}
	p.spotCache.Add("", m)
	p.lastSpot = m
	return m, nil
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
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(vcpus, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
	if gpus > 0 {
		labels[catalog.LabelInstanceGPUCount] = strconv.FormatInt(gpus, 10)
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	alloc := capacity.DeepCopy()
	alloc[corev1.ResourceCPU] = *resource.NewMilliQuantity(vcpus*1000-reservedMilliCPU(vcpus), resource.DecimalSI)
	alloc[corev1.ResourceMemory] = *resource.NewQuantity((memMiB-(11*pods+255)-100)*1024*1024, resource.BinarySI)
	alloc[corev1.ResourceEphemeralStorage] = resource.MustParse("17Gi")
	return labels, capacity, alloc
}

// reservedMilliCPU is the EKS kube-reserved cpu: 6% of the first core, 1% of
// the second, 0.5% of the next two and 0.25% of the rest.
func reservedMilliCPU(vcpus int64) int64 {
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
