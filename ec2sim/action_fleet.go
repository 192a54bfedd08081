package ec2sim

import (
	"encoding/base64"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/karpx/karpx/catalog"
)

// CreateFleet (Type=instant) and RunInstances, and the launch core they share.

// launchParams is everything needed to launch one instance.
type launchParams struct {
	instanceType, imageID, arch string
	subnet                      *subnetState
	capacityType                string
	tags                        tagSet
	sgIDs                       []string
	baseBehavior                Behavior
	ltID, ltName, ltVersion     string
	fleetID, reservationID      string
	launchIndex                 int
}

// launchLocked creates one pending instance. inUse holds the private
// addresses taken and is updated.
func (s *Simulator) launchLocked(now time.Time, lp launchParams, inUse map[string]bool) (*instance, *APIError) {
	ip, ok := lp.subnet.allocate(inUse)
	if !ok {
		return nil, newError("InsufficientFreeAddressesInSubnet",
			"There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", lp.subnet.ID)
	}
	inUse[ip.String()] = true
	sgs := lp.sgIDs
	if len(sgs) == 0 && len(s.securityGroups) > 0 {
		sgs = []string{s.securityGroups[0].ID}
	}
	in := &instance{
		id: s.ids.next("i-"), instanceType: lp.instanceType, zone: lp.subnet.Zone, subnetID: lp.subnet.ID, vpcID: lp.subnet.VPCID,
		imageID: lp.imageID, privateIP: ip.String(), privateDNS: privateDNSName(ip, s.cfg.Region), capacityType: lp.capacityType,
		arch: lp.arch, reservationID: lp.reservationID, fleetID: lp.fleetID, ltID: lp.ltID, ltName: lp.ltName, ltVersion: lp.ltVersion,
		securityGroups: sgs, tags: lp.tags, launchTime: now, launchIndex: lp.launchIndex, baseBehavior: lp.baseBehavior,
	}
	if lt := s.launchTemplates[lp.ltID]; lt != nil {
		in.iamInstanceProfile = lt.iamInstanceProfile
	}
	in.behavior = in.baseBehavior
	if v, ok := in.tags.get(BehaviorTagKey); ok {
		b, err := ParseBehavior(v) // validated by the callers
		if err == nil {
			in.behavior = in.behavior.merge(b)
		}
	}
	s.instances[in.id] = in
	s.order = append(s.order, in.id)
	s.metrics.launched.WithLabelValues(in.instanceType, in.zone, in.capacityType).Inc()
	s.log.V(1).Info("Launched instance", "instanceID", in.id, "instanceType", in.instanceType, "zone", in.zone,
		"capacityType", in.capacityType, "privateDNSName", in.privateDNS, "behavior", in.behavior.String())
	return in, nil
}

// inUseAddressesLocked returns the private addresses of instances not yet
// terminated.
func (s *Simulator) inUseAddressesLocked(now time.Time) map[string]bool {
	used := map[string]bool{}
	for _, in := range s.instances {
		if in.state(now, &s.cfg) != StateTerminated {
			used[in.privateIP] = true
		}
	}
	return used
}

// checkImageLocked validates an AMI for an instance type: shape, existence
// and architecture, with EC2's codes.
func (s *Simulator) checkImageLocked(imageID string, it catalog.InstanceType) (*Image, *APIError) {
	if imageID == "" {
		return nil, errMissingParameter("ImageId")
	}
	if !reAMIID.MatchString(imageID) {
		return nil, errMalformedID("InvalidAMIID.Malformed", imageID, "ami-")
	}
	img := s.images[imageID]
	if img == nil {
		return nil, newError("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", imageID)
	}
	if want := ec2Arch(it.Arch()); img.Architecture != want {
		return nil, newError(CodeInvalidParameterValue,
			"The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. "+
				"Specify an instance type and an AMI that have matching architectures, and try again.", want, img.Architecture)
	}
	return img, nil
}

func errUnknownInstanceType(t string) *APIError {
	return newError(CodeInvalidParameterValue, "Invalid value '%s' for InstanceType.", t)
}

// errInsufficientCapacity is EC2's answer for a refused capacity pool.
func (s *Simulator) errInsufficientCapacity(instanceType, zone, capacityType string) *APIError {
	if capacityType == capacitySpot {
		return newError(CodeInsufficientInstanceCapacity, "There is no Spot capacity available that matches your request.")
	}
	var others []string
	for _, z := range s.cfg.Zones {
		if z != zone {
			others = append(others, z)
		}
	}
	return newError(CodeInsufficientInstanceCapacity, "We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). "+
		"Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an "+
		"Availability Zone in your request or choosing %s.", instanceType, zone, instanceType, strings.Join(others, ", "))
}

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

// fleetPool is one capacity pool (launch template × override × zone) of a
// CreateFleet request.
type fleetPool struct {
	spec     xmlFleetLTSpec
	echo     xmlFleetOverrides
	lp       launchParams
	priority float64 // +Inf when unset
	price    float64 // USD per hour, +Inf when unknown
	order    int
	launched []string
	refused  bool
}

var (
	onDemandStrategies = []string{"lowest-price", "prioritized"}
	spotStrategies     = []string{"lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized"}
)

// maxInstantFleetCapacity bounds TotalTargetCapacity of one call.
const maxInstantFleetCapacity = 1000

// createFleet is EC2's CreateFleet (Type=instant). Longer than 80 lines on
// purpose: it is one action read in the order EC2 handles it (parameter
// checks in the order EC2 reports their errors, then the pools of every
// override through fleetPoolsLocked, the allocation strategy's choice and
// the response), so that order can be checked against EC2's documentation
// in one place.
func (s *Simulator) createFleet(req *request) (any, error) {
	p := req.p
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
	if ct != capacityOnDemand && ct != capacitySpot {
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
			pools = append(pools, s.fleetPoolsLocked(spec, lt, ov, ct, len(pools), fail)...)
		}
	}
	prioritized := strategy == "prioritized" || strategy == "capacity-optimized-prioritized"
	sort.SliceStable(pools, func(i, j int) bool {
		a, b := pools[i], pools[j]
		if prioritized && a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.price != b.price {
			return a.price < b.price
		}
		return a.order < b.order
	})

	inUse := s.inUseAddressesLocked(req.now)
	next := 0 // round-robin cursor for "diversified"
	for launched := 0; launched < total; {
		var chosen *fleetPool
		for k := range pools {
			pl := pools[(next+k)%len(pools)]
			if pl.refused {
				continue
			}
			if s.faults.insufficient(pl.lp.instanceType, pl.lp.subnet.Zone, ct) {
				pl.refused = true
				fail(pl.spec, &pl.echo, s.errInsufficientCapacity(pl.lp.instanceType, pl.lp.subnet.Zone, ct))
				continue
			}
			chosen = pl
			if strategy == "diversified" {
				next = (next + k + 1) % len(pools)
			}
			break
		}
		if chosen == nil {
			break
		}
		lp := chosen.lp
		lp.tags = lp.tags.set(reqTags...)
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
	s.log.V(1).Info("CreateFleet", "fleetID", out.FleetID, "capacityType", ct, "strategy", strategy,
		"target", total, "pools", len(pools), "instances", len(out.Instances), "errors", len(out.Errors))
	return out, nil
}

// fleetPoolsLocked validates one override and expands it into its pools
// (one per zone when it names neither subnet nor zone). Invalid overrides
// are reported through fail. Longer than 80 lines on purpose: the checks
// of one override stand in the order EC2 reports their errors.
func (s *Simulator) fleetPoolsLocked(spec xmlFleetLTSpec, lt *launchTemplate, ov params, ct string, order int,
	fail func(xmlFleetLTSpec, *xmlFleetOverrides, *APIError)) []*fleetPool {
	echo := xmlFleetOverrides{InstanceType: ov.str("InstanceType"), SubnetID: ov.str("SubnetId"),
		AvailabilityZone: ov.str("AvailabilityZone"), ImageID: ov.str("ImageId")}
	priority := math.Inf(1)
	if v := ov.str("Priority"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			fail(spec, &echo, errInvalidValue(v, "Priority"))
			return nil
		}
		echo.Priority, priority = &f, f
	}
	if v := ov.str("WeightedCapacity"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			echo.WeightedCapacity = &f
		}
	}
	itype := echo.InstanceType
	if itype == "" {
		itype = lt.instanceType
	}
	if itype == "" {
		fail(spec, &echo, errMissingParameter("InstanceType"))
		return nil
	}
	it, ok := catalog.Get(itype)
	if !ok {
		fail(spec, &echo, errUnknownInstanceType(itype))
		return nil
	}
	imageID := echo.ImageID
	if imageID == "" {
		imageID = lt.imageID
	}
	img, ae := s.checkImageLocked(imageID, it)
	if ae != nil {
		fail(spec, &echo, ae)
		return nil
	}
	var subnets []*subnetState
	switch {
	case echo.SubnetID != "":
		if !reSubnetID.MatchString(echo.SubnetID) {
			fail(spec, &echo, errMalformedID("InvalidSubnetID.Malformed", echo.SubnetID, "subnet-"))
			return nil
		}
		sn := s.subnetLocked(echo.SubnetID)
		if sn == nil {
			fail(spec, &echo, newError("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", echo.SubnetID))
			return nil
		}
		if echo.AvailabilityZone != "" && echo.AvailabilityZone != sn.Zone {
			fail(spec, &echo, newError(CodeInvalidParameterValue, "The subnet '%s' is not in Availability Zone '%s'.", sn.ID, echo.AvailabilityZone))
			return nil
		}
		subnets = []*subnetState{sn}
	case echo.AvailabilityZone != "":
		if !contains(s.cfg.Zones, echo.AvailabilityZone) {
			fail(spec, &echo, newError(CodeInvalidParameterValue, "Invalid availability zone: [%s]", echo.AvailabilityZone))
			return nil
		}
		for _, sn := range s.subnets {
			if sn.Zone == echo.AvailabilityZone {
				subnets = append(subnets, sn)
				break
			}
		}
		if len(subnets) == 0 {
			fail(spec, &echo, newError(CodeInvalidParameterValue, "No subnet in Availability Zone '%s'.", echo.AvailabilityZone))
			return nil
		}
	default:
		seen := map[string]bool{}
		for _, sn := range s.subnets {
			if !seen[sn.Zone] {
				seen[sn.Zone] = true
				subnets = append(subnets, sn)
			}
		}
	}
	var pools []*fleetPool
	for _, sn := range subnets {
		e := echo
		e.AvailabilityZone, e.SubnetID, e.InstanceType = sn.Zone, sn.ID, itype
		if !s.offered(itype, sn.Zone) {
			fail(spec, &e, newError(CodeUnsupported, "Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", itype, sn.Zone))
			continue
		}
		price, ok := onDemandPrice(itype)
		if ct == capacitySpot {
			price, ok = SpotPrice(itype, sn.Zone)
		}
		if !ok {
			price = math.Inf(1)
		}
		pools = append(pools, &fleetPool{spec: spec, echo: e, priority: priority, price: price, order: order + len(pools),
			lp: launchParams{instanceType: itype, imageID: img.ID, arch: img.Architecture, subnet: sn, capacityType: ct,
				tags: lt.instanceTags, sgIDs: lt.sgIDs, baseBehavior: lt.behavior, ltID: lt.id, ltName: lt.name,
				ltVersion: "1"}})
	}
	return pools
}

type runInstancesResponse struct {
	respMeta
	xmlReservation
}

// runInstances is EC2's RunInstances. Longer than 80 lines on purpose, as
// createFleet: parameter checks in the order EC2 reports their errors, then
// the launch and the response, read in one place.
func (s *Simulator) runInstances(req *request) (any, error) {
	p := req.p
	minCount, okMin, e := p.integer("MinCount")
	if e != nil {
		return nil, e
	}
	maxCount, okMax, e := p.integer("MaxCount")
	if e != nil {
		return nil, e
	}
	switch {
	case !okMin:
		return nil, errMissingParameter("MinCount")
	case !okMax:
		return nil, errMissingParameter("MaxCount")
	case minCount < 1 || maxCount < minCount || maxCount > maxInstantFleetCapacity:
		return nil, newError(CodeInvalidParameterValue, "Invalid MinCount %d / MaxCount %d", minCount, maxCount)
	}
	ct := capacityOnDemand
	if p.str("InstanceMarketOptions.MarketType") == "spot" {
		ct = capacitySpot
	}
	specs, e := p.tagSpecs("TagSpecification", "instance", "volume", "network-interface", "spot-instances-request")
	if e != nil {
		return nil, e
	}
	reqTags := tagSet(nil).set(specs["instance"]...)
	var udBehavior Behavior
	if ud := p.str("UserData"); ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return nil, newError("InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
		if udBehavior, err = behaviorFromUserData(string(raw)); err != nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid karpx-sim marker in user data: %v", err)
		}
	}
	if v, ok := reqTags.get(BehaviorTagKey); ok {
		if _, err := ParseBehavior(v); err != nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid %s tag: %v", BehaviorTagKey, err)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	lt := &launchTemplate{}
	if p.hasPrefix("LaunchTemplate") {
		ls := p.child("LaunchTemplate")
		found, ae := s.findLaunchTemplateLocked(ls.str("LaunchTemplateId"), ls.str("LaunchTemplateName"))
		if ae != nil {
			return nil, ae
		}
		lt = found
	}
	itype := p.str("InstanceType")
	if itype == "" {
		itype = lt.instanceType
	}
	if itype == "" {
		return nil, errMissingParameter("InstanceType")
	}
	it, ok := catalog.Get(itype)
	if !ok {
		return nil, errUnknownInstanceType(itype)
	}
	imageID := p.str("ImageId")
	if imageID == "" {
		imageID = lt.imageID
	}
	img, ae := s.checkImageLocked(imageID, it)
	if ae != nil {
		return nil, ae
	}
	var sn *subnetState
	switch subnetID, zone := p.str("SubnetId"), p.str("Placement.AvailabilityZone"); {
	case subnetID != "":
		if !reSubnetID.MatchString(subnetID) {
			return nil, errMalformedID("InvalidSubnetID.Malformed", subnetID, "subnet-")
		}
		if sn = s.subnetLocked(subnetID); sn == nil {
			return nil, newError("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnetID)
		}
	case zone != "":
		for _, cand := range s.subnets {
			if cand.Zone == zone {
				sn = cand
				break
			}
		}
		if sn == nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid availability zone: [%s]", zone)
		}
	default:
		sn = s.subnets[0]
	}
	if !s.offered(itype, sn.Zone) {
		return nil, newError(CodeUnsupported, "Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", itype, sn.Zone)
	}
	if s.faults.insufficient(itype, sn.Zone, ct) {
		return nil, s.errInsufficientCapacity(itype, sn.Zone, ct)
	}
	sgs := p.list("SecurityGroupId")
	if len(sgs) == 0 {
		sgs = lt.sgIDs
	}
	behavior := lt.behavior
	if p.str("UserData") != "" {
		behavior = udBehavior
	}
	out := &runInstancesResponse{xmlReservation: xmlReservation{ReservationID: s.ids.next("r-"), OwnerID: s.cfg.AccountID}}
	inUse := s.inUseAddressesLocked(req.now)
	for i := range maxCount {
		in, ae := s.launchLocked(req.now, launchParams{instanceType: itype, imageID: img.ID, arch: img.Architecture, subnet: sn,
			capacityType: ct, tags: lt.instanceTags.set(reqTags...), sgIDs: sgs, baseBehavior: behavior, ltID: lt.id, ltName: lt.name,
			reservationID: out.ReservationID, launchIndex: i}, inUse)
		if ae != nil {
			if i < minCount {
				// EC2 launches all of MinCount or nothing.
				for _, x := range out.Instances {
					s.forgetLocked(x.InstanceID)
				}
				return nil, ae
			}
			break
		}
		out.Instances = append(out.Instances, s.instanceXML(in, req.now))
	}
	for _, g := range sgs {
		out.Groups = append(out.Groups, xmlGroup{GroupID: g, GroupName: s.sgName(g)})
	}
	return out, nil
}

// forgetLocked removes an instance that must not have existed.
func (s *Simulator) forgetLocked(id string) {
	delete(s.instances, id)
	for i, o := range s.order {
		if o == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}
