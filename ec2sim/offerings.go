package ec2sim

// offered reports whether an instance type is offered in a zone.
func (s *Simulator) offered(instanceType, zone string) bool {
	if s.cfg.Offered == nil {
		return true
	}
	return s.cfg.Offered(instanceType, zone)
}

type xmlOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeOfferingsResponse struct {
	respMeta
	Offerings []xmlOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string        `xml:"nextToken,omitempty"`
}

func (s *Simulator) describeInstanceTypeOfferings(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlOffering{}, offeringField)
	if err != nil {
		return nil, err
	}
	lt := req.p.str("LocationType")
	if lt == "" {
		lt = "region"
	}
	if lt != "region" && lt != "availability-zone" && lt != "availability-zone-id" {
		return nil, errInvalidValue(lt, "LocationType")
	}
	offset, size, perr := req.p.pageRange(5, 1000, 1000)
	if perr != nil {
		return nil, perr
	}
	m := matching[xmlOffering]{fs: fs, field: offeringField}
	for _, x := range allTypeInfos() {
		locs := []string{s.cfg.Region}
		if lt != "region" {
			locs = locs[:0]
			for _, z := range s.cfg.Zones {
				if !s.offered(x.InstanceType, z) {
					continue
				}
				if lt == "availability-zone" {
					locs = append(locs, z)
				} else {
					locs = append(locs, zoneID(s.cfg.Region, z))
				}
			}
		}
		for _, loc := range locs {
			o := xmlOffering{InstanceType: x.InstanceType, LocationType: lt, Location: loc}
			m.add(o, nil)
		}
	}
	return answer(&m, offset, size, func(page []xmlOffering, next string) any {
		return &describeOfferingsResponse{Offerings: page, NextToken: next}
	})
}

func offeringField(o xmlOffering, name string) ([]string, bool) {
	switch name {
	case "instance-type":
		return one(o.InstanceType), true
	case "location":
		return one(o.Location), true
	}
	return nil, false
}
