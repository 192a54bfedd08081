package instancetype

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// Provider lists instance types and their offerings. It is safe for
// concurrent use.
//
// The catalogue (DescribeInstanceTypes and DescribeInstanceTypeOfferings)
// and spot prices are kept as last good copies: a refresh that fails keeps
// the copy, an empty answer after a non-empty one is suspect and kept too
// (with a warning), and readers never wait behind a refresh once the data
// is hydrated. Before the catalogue is hydrated, List loads it (callers
// wait for the one load in progress) and fails with a transient
// *hydration.NotHydratedError if the load fails.
type Provider struct {
	api         ec2api.API
	unavailable *UnavailableOfferings
	clk         clock.PassiveClock
	opts        Options
	ttls        cache.TTLs

	// catalogueMu serializes catalogue refreshes; readers use stateMu.
	catalogueMu sync.Mutex
	// spotMu serializes spot-price refreshes; a refresh that finds it
	// held serves the last prices instead of waiting.
	spotMu sync.Mutex

	stateMu   sync.Mutex
	catalogue []Info
	infosAt   time.Time // zero until hydrated
	infosErr  error
	lastSpot  map[string]float64
	spotAt    time.Time
	spotPages *spotPages // a refresh refused part-way, resumed next time
	zoneIDs   cache.Store[string, map[string]string]
	zoneMu    sync.Mutex
}

// Options configure a Provider beyond its API and TTLs.
type Options struct {
	// Registry receives the state of the instance-types, offerings and
	// spot-prices data sets. Default: a private registry.
	Registry *hydration.Registry
	// Logger receives warnings about suspect answers. Default: discard.
	Logger logr.Logger
}

// NewProvider returns a Provider over api that consults unavailable for
// offering availability and keeps data for ttls.InstanceTypes and
// ttls.SpotPrice before refreshing it.
func NewProvider(api ec2api.API, unavailable *UnavailableOfferings, ttls cache.TTLs, opts ...Options) *Provider {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Registry == nil {
		o.Registry = hydration.NewRegistry()
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return &Provider{
		api:         api,
		unavailable: unavailable,
		clk:         clock.RealClock{},
		opts:        o,
		ttls:        ttls,
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
	p.zoneMu.Lock()
	defer p.zoneMu.Unlock()
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

// infos returns the catalogue: the last good copy while it is younger than
// ttls.InstanceTypes; a stale copy is refreshed at Speculative priority by
// the caller that finds it stale (others keep reading the copy), and kept
// when the refresh fails. Before hydration it loads the catalogue (see
// Provider).
func (p *Provider) infos(ctx context.Context) ([]Info, error) {
	p.stateMu.Lock()
	infos, at := p.catalogue, p.infosAt
	p.stateMu.Unlock()
	switch {
	case !at.IsZero() && p.clk.Since(at) < p.ttls.InstanceTypes:
		return infos, nil
	case !at.IsZero():
		if p.catalogueMu.TryLock() {
			// Stale: refresh in the background of this call's budget,
			// yielding to launches; the copy serves meanwhile.
			_ = p.refreshCatalogue(cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative))
			p.catalogueMu.Unlock()
		}
		p.stateMu.Lock()
		defer p.stateMu.Unlock()
		return p.catalogue, nil
	}
	p.catalogueMu.Lock()
	defer p.catalogueMu.Unlock()
	p.stateMu.Lock()
	infos, at = p.catalogue, p.infosAt
	p.stateMu.Unlock()
	if !at.IsZero() {
		return infos, nil // loaded while this call waited
	}
	if err := p.refreshCatalogue(ctx); err != nil {
		return nil, &hydration.NotHydratedError{DataSet: hydration.InstanceTypes, Err: err}
	}
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	return p.catalogue, nil
}

// RefreshCatalogue loads the instance types and their offerings now and
// reports both data sets to the Registry. It is the Hydrator's Source for
// the catalogue. On failure, or on a suspect empty answer, the last good
// copy stays and the error is returned.
func (p *Provider) RefreshCatalogue(ctx context.Context) error {
	p.catalogueMu.Lock()
	defer p.catalogueMu.Unlock()
	return p.refreshCatalogue(ctx)
}

// refreshCatalogue does RefreshCatalogue's work; catalogueMu is held.
func (p *Provider) refreshCatalogue(ctx context.Context) error {
	infos, offerings, err := p.describeCatalogue(ctx)
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if err != nil {
		p.infosErr = err
		p.opts.Registry.Failed(hydration.InstanceTypes, err)
		p.opts.Registry.Failed(hydration.Offerings, err)
		return err
	}
	if len(infos) == 0 && len(p.catalogue) > 0 {
		err := fmt.Errorf("suspect empty answer (%d instance types before): kept the last good catalogue", len(p.catalogue))
		p.opts.Logger.Info("WARNING: instance-type refresh returned no types; keeping the last good catalogue", "kept", len(p.catalogue))
		p.infosErr = err
		p.opts.Registry.Failed(hydration.InstanceTypes, err)
		p.opts.Registry.Failed(hydration.Offerings, err)
		return err
	}
	p.catalogue, p.infosAt, p.infosErr = infos, p.clk.Now(), nil
	p.opts.Registry.Succeeded(hydration.InstanceTypes, len(infos))
	p.opts.Registry.Succeeded(hydration.Offerings, offerings)
	return nil
}

// describeCatalogue calls DescribeInstanceTypeOfferings and
// DescribeInstanceTypes; it returns the types offered somewhere, sorted,
// and the number of (type, zone) offerings.
func (p *Provider) describeCatalogue(ctx context.Context) ([]Info, int, error) {
	zonesByType := map[string][]string{}
	offerings := 0
	offPager := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.api, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	for offPager.HasMorePages() {
		out, err := offPager.NextPage(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range out.InstanceTypeOfferings {
			name := string(o.InstanceType)
			zonesByType[name] = append(zonesByType[name], aws.ToString(o.Location))
			offerings++
		}
	}
	var infos []Info
	pager := ec2.NewDescribeInstanceTypesPaginator(p.api, &ec2.DescribeInstanceTypesInput{})
	for pager.HasMorePages() {
		out, err := pager.NextPage(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("describing instance types: %w", err)
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
	return infos, offerings, nil
}
