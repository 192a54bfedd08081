package ec2sim

import "strconv"

// CreateFleet (Type=instant): the request's checks, the launches and the
// response. Its capacity pools are in fleet_pools.go, the launch core in
// launch.go.

type xmlFleetLTSpec struct {
	LaunchTemplateID   string `xml:"launchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
	Version            string `xml:"version,omitempty"`
}

type xmlFleetOverrides struct {
	InstanceType     string   `xml:"instanceType,omitempty"`
	SubnetID         string   `xml:"subnetId,omitempty"`
	AvailabilityZone string   `xml:"availabilityZone,omitempty"`
	ImageID          string   `xml:"imageId,omitempty"`
	Priority         *float64 `xml:"priority,omitempty"`
	WeightedCapacity *float64 `xml:"weightedCapacity,omitempty"`
}

type xmlLTAndOverrides struct {
	LaunchTemplateSpecification xmlFleetLTSpec     `xml:"launchTemplateSpecification"`
	Overrides                   *xmlFleetOverrides `xml:"overrides,omitempty"`
}

type xmlFleetError struct {
	LaunchTemplateAndOverrides xmlLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string            `xml:"lifecycle"`
	ErrorCode                  string            `xml:"errorCode"`
	ErrorMessage               string            `xml:"errorMessage"`
}

type xmlFleetInstance struct {
	LaunchTemplateAndOverrides xmlLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string            `xml:"lifecycle"`
	InstanceIDs                []string          `xml:"instanceIds>item"`
	InstanceType               string            `xml:"instanceType"`
	AvailabilityZone           string            `xml:"availabilityZone"`
	SubnetID                   string            `xml:"subnetId"`
}

type createFleetResponse struct {
	respMeta
	FleetID   string             `xml:"fleetId"`
	Errors    []xmlFleetError    `xml:"errorSet>item"`
	Instances []xmlFleetInstance `xml:"fleetInstanceSet>item"`
}

var (
	onDemandStrategies = []string{"lowest-price", "prioritized"}
	spotStrategies     = []string{"lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized"}
)

// maxInstantFleetCapacity bounds TotalTargetCapacity of one call.
const maxInstantFleetCapacity = 1000

// fleetRequest is what a CreateFleet request asks for, once the checks that
// need no simulator state passed.
type fleetRequest struct {
	total        int    // TotalTargetCapacity, 1..maxInstantFleetCapacity instances
	capacityType string // capacityOnDemand, capacitySpot or marketTypeCapacityBlock
	strategy     string // the allocation strategy of capacityType
	tags         tagSet // the instance tags of the TagSpecifications
}

// parseFleetRequest checks a CreateFleet request in the order EC2 reports
// its errors: Type, LaunchTemplateConfigs, TargetCapacitySpecification,
// the allocation strategy, then the TagSpecifications and their
// BehaviorTagKey tag.
func parseFleetRequest(p params) (*fleetRequest, *APIError) {
	if typ := p.str("Type"); typ != "instant" {
		if typ == "" {
			typ = "maintain"
		}
		return nil, newError(CodeUnsupported, "The simulator supports CreateFleet with Type=instant only, not %q.", typ)
	}
	if !p.hasPrefix("LaunchTemplateConfigs") {
		return nil, errMissingParameter("LaunchTemplateConfigs")
	}
	tcs := p.child("TargetCapacitySpecification")
	total, ok, e := tcs.integer("TotalTargetCapacity")
	if e != nil {
		return nil, e
	}
	if !ok {
		return nil, errMissingParameter("TargetCapacitySpecification.TotalTargetCapacity")
	}
	if total < 1 || total > maxInstantFleetCapacity {
		return nil, errInvalidValue(strconv.Itoa(total), "TotalTargetCapacity")
	}
	ct := tcs.str("DefaultTargetCapacityType")
	if ct == "" {
		ct = capacityOnDemand
	}
	if ct != capacityOnDemand && ct != capacitySpot && ct != marketTypeCapacityBlock {
		return nil, errInvalidValue(ct, "DefaultTargetCapacityType")
	}
	strategy := p.str("OnDemandOptions.AllocationStrategy")
	valid := onDemandStrategies
	if ct == capacitySpot {
		strategy, valid = p.str("SpotOptions.AllocationStrategy"), spotStrategies
	}
	if strategy == "" {
		strategy = "lowest-price"
	}
	if !contains(valid, strategy) {
		return nil, errInvalidValue(strategy, "AllocationStrategy")
	}
	specs, e := p.tagSpecs("TagSpecification", "instance", "volume", "fleet", "network-interface", "spot-instances-request")
	if e != nil {
		return nil, e
	}
	reqTags := tagSet(nil).set(specs["instance"]...)
	if v, ok := reqTags.get(BehaviorTagKey); ok {
		if _, err := ParseBehavior(v); err != nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid %s tag: %v", BehaviorTagKey, err)
		}
	}
	return &fleetRequest{total: total, capacityType: ct, strategy: strategy, tags: reqTags}, nil
}

// createFleet is EC2's CreateFleet (Type=instant), read in the order EC2
// handles it: the request's checks (parseFleetRequest), the pools of every
// override (fleetPoolsLocked), the allocation strategy's order and choice
// (sortFleetPools, pickFleetPoolLocked), the launches and the response.
// Pools that fail are reported in the response's errorSet, not as the
// call's error.
func (s *Simulator) createFleet(req *request) (any, error) {
	p := req.p
	fr, ae := parseFleetRequest(p)
	if ae != nil {
		return nil, ae
	}
	ct := fr.capacityType
	// A capacity-block fleet's instances are on-demand instances in the
	// targeted Capacity Block; its pools are priced and faulted as
	// on-demand ones.
	poolCT := ct
	if ct == marketTypeCapacityBlock {
		poolCT = capacityOnDemand
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	out := &createFleetResponse{FleetID: s.ids.uuid("fleet-")}
	reservationID := s.ids.next("r-")
	fail := func(spec xmlFleetLTSpec, echo *xmlFleetOverrides, ae *APIError) {
		out.Errors = append(out.Errors, xmlFleetError{LaunchTemplateAndOverrides: xmlLTAndOverrides{LaunchTemplateSpecification: spec, Overrides: echo},
			Lifecycle: ct, ErrorCode: ae.Code, ErrorMessage: ae.Message})
		s.metrics.fleetErrors.WithLabelValues(ae.Code).Inc()
	}
	var pools []*fleetPool
	for _, cfg := range p.items("LaunchTemplateConfigs") {
		ls := cfg.child("LaunchTemplateSpecification")
		spec := xmlFleetLTSpec{LaunchTemplateID: ls.str("LaunchTemplateId"), LaunchTemplateName: ls.str("LaunchTemplateName"), Version: ls.str("Version")}
		lt, ae := s.findLaunchTemplateLocked(spec.LaunchTemplateID, spec.LaunchTemplateName)
		if ae != nil {
			fail(spec, nil, ae)
			continue
		}
		spec.LaunchTemplateID, spec.LaunchTemplateName = lt.id, lt.name
		if v := spec.Version; v != "" && v != "$Latest" && v != "$Default" && v != "1" {
			fail(spec, nil, newError("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for launch template %s.", v, lt.id))
			continue
		}
		ovs := cfg.items("Overrides")
		if len(ovs) == 0 {
			ovs = []params{newParams(nil)}
		}
		for _, ov := range ovs {
			pools = append(pools, s.fleetPoolsLocked(spec, lt, ov, poolCT, len(pools), fail)...)
		}
	}
	sortFleetPools(pools, fr.strategy)

	inUse := s.inUseAddressesLocked(req.now)
	next := 0 // round-robin cursor for "diversified"
	for launched := 0; launched < fr.total; {
		var chosen *fleetPool
		chosen, next = s.pickFleetPoolLocked(req.now, pools, next, ct, fr.strategy == "diversified", fail)
		if chosen == nil {
			break
		}
		lp := chosen.lp
		lp.tags = lp.tags.set(fr.tags...)
		lp.launchIndex = launched
		lp.fleetID, lp.reservationID = out.FleetID, reservationID
		in, ae := s.launchLocked(req.now, lp, inUse)
		if ae != nil {
			chosen.refused = true
			fail(chosen.spec, &chosen.echo, ae)
			continue
		}
		chosen.launched = append(chosen.launched, in.id)
		launched++
	}
	for _, pl := range pools {
		if len(pl.launched) == 0 {
			continue
		}
		echo := pl.echo
		out.Instances = append(out.Instances, xmlFleetInstance{
			LaunchTemplateAndOverrides: xmlLTAndOverrides{LaunchTemplateSpecification: pl.spec, Overrides: &echo},
			Lifecycle:                  ct, InstanceIDs: pl.launched, InstanceType: pl.lp.instanceType,
			AvailabilityZone: pl.lp.subnet.Zone, SubnetID: pl.lp.subnet.ID,
		})
	}
	s.log.V(1).Info("CreateFleet", "fleetID", out.FleetID, "capacityType", ct, "strategy", fr.strategy,
		"target", fr.total, "pools", len(pools), "instances", len(out.Instances), "errors", len(out.Errors))
	return out, nil
}
