package ec2sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/karpx/karpx/catalog"
)

// SpotPrice returns the simulated spot price (USD per hour) of an instance
// type in a zone: 30–40% of the on-demand price, chosen by a hash of type
// and zone so it is stable. ok is false for types without an on-demand price.
func SpotPrice(instanceType, zone string) (price float64, ok bool) {
	it, found := catalog.Get(instanceType)
	if !found || it.OnDemandPriceUSDPerHour == nil {
		return 0, false
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(instanceType + "/" + zone))
	frac := float64(h.Sum64()%10_000) / 10_000
	return *it.OnDemandPriceUSDPerHour * (0.30 + 0.10*frac), true
}

// onDemandPrice returns the catalogue's on-demand price, or ok false.
func onDemandPrice(instanceType string) (float64, bool) {
	it, found := catalog.Get(instanceType)
	if !found || it.OnDemandPriceUSDPerHour == nil {
		return 0, false
	}
	return *it.OnDemandPriceUSDPerHour, true
}

type xmlSpotPrice struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

type describeSpotPriceHistoryResponse struct {
	respMeta
	Prices    []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

var spotProducts = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

func (s *Simulator) describeSpotPriceHistory(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlSpotPrice{}, spotPriceField)
	if err != nil {
		return nil, err
	}
	types := req.p.list("InstanceType")
	products := req.p.list("ProductDescription")
	zone := req.p.str("AvailabilityZone")
	if zone != "" && !contains(s.cfg.Zones, zone) {
		return nil, newError(CodeInvalidParameterValue, "Invalid availability zone: [%s]", zone)
	}
	// The API reference gives MaxResults no range (unlike the 5–1000 of
	// DescribeInstances); Karpenter's AWS provider asks for 2000 per page
	// (pkg/providers/pricing/pricing.go@v1.14.0, UpdateSpotPricing, whose
	// comment notes that EC2 does not seem to limit the page size) and EC2
	// answers it. So any positive MaxResults is a page size; absent, a
	// page is 1000.
	offset, size, perr := req.p.pageRange(1, math.MaxInt32, 1000)
	if perr != nil {
		return nil, perr
	}
	// Prices change hourly in the simulator; the answer carries the start of
	// the current hour as the timestamp.
	ts := ec2Time(req.now.Truncate(time.Hour))
	m := matching[xmlSpotPrice]{fs: fs, field: spotPriceField}
	for _, x := range allTypeInfos() {
		if len(types) > 0 && !contains(types, x.InstanceType) {
			continue
		}
		for _, z := range s.cfg.Zones {
			if (zone != "" && z != zone) || !s.offered(x.InstanceType, z) {
				continue
			}
			price, ok := SpotPrice(x.InstanceType, z)
			if !ok {
				continue
			}
			for _, prod := range spotProducts {
				if len(products) > 0 && !contains(products, prod) {
					continue
				}
				sp := xmlSpotPrice{AvailabilityZone: z, AvailabilityZoneID: zoneID(s.cfg.Region, z), InstanceType: x.InstanceType,
					ProductDescription: prod, SpotPrice: fmt.Sprintf("%.6f", price), Timestamp: ts}
				m.add(sp, nil)
			}
		}
	}
	return answer(&m, offset, size, func(page []xmlSpotPrice, next string) any {
		return &describeSpotPriceHistoryResponse{Prices: page, NextToken: next}
	})
}

func spotPriceField(sp xmlSpotPrice, name string) ([]string, bool) {
	switch name {
	case "instance-type":
		return one(sp.InstanceType), true
	case "availability-zone":
		return one(sp.AvailabilityZone), true
	case "product-description":
		return one(sp.ProductDescription), true
	case "spot-price":
		return one(sp.SpotPrice), true
	case "timestamp":
		return one(sp.Timestamp), true
	}
	return nil, false
}
