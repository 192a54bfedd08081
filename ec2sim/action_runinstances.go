package ec2sim

import (
	"encoding/base64"

	"github.com/karpx/karpx/catalog"
)

// RunInstances: one instance type in one subnet, MinCount..MaxCount
// instances, all of MinCount or none. The launch core is in launch.go.

type runInstancesResponse struct {
	respMeta
	xmlReservation
}

// runRequest is what a RunInstances request asks for, once the checks that
// need no simulator state passed.
type runRequest struct {
	minCount, maxCount int      // 1 <= minCount <= maxCount <= maxInstantFleetCapacity
	capacityType       string   // capacityOnDemand, or capacitySpot for InstanceMarketOptions.MarketType=spot
	tags               tagSet   // the instance tags of the TagSpecifications
	userData           bool     // UserData was given: its behaviour replaces the launch template's
	udBehavior         Behavior // the karpx-sim marker of UserData (see behaviorFromUserData)
	rawUserData        string   // UserData, decoded
}

// parseRunRequest checks a RunInstances request in the order EC2 reports
// its errors: MinCount and MaxCount, the TagSpecifications, the UserData
// encoding and its karpx-sim marker, then the BehaviorTagKey tag.
func parseRunRequest(p params) (*runRequest, *APIError) {
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
	rr := &runRequest{minCount: minCount, maxCount: maxCount, capacityType: capacityOnDemand}
	if p.str("InstanceMarketOptions.MarketType") == "spot" {
		rr.capacityType = capacitySpot
	}
	specs, e := p.tagSpecs("TagSpecification", "instance", "volume", "network-interface", "spot-instances-request")
	if e != nil {
		return nil, e
	}
	rr.tags = tagSet(nil).set(specs["instance"]...)
	if ud := p.str("UserData"); ud != "" {
		rr.userData = true
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return nil, newError("InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
		rr.rawUserData = string(raw)
		if rr.udBehavior, err = behaviorFromUserData(string(raw)); err != nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid karpx-sim marker in user data: %v", err)
		}
	}
	if v, ok := rr.tags.get(BehaviorTagKey); ok {
		if _, err := ParseBehavior(v); err != nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid %s tag: %v", BehaviorTagKey, err)
		}
	}
	return rr, nil
}

// runSubnetLocked returns the subnet RunInstances launches into: SubnetId,
// else the first subnet of Placement.AvailabilityZone, else the first
// subnet.
func (s *Simulator) runSubnetLocked(subnetID, zone string) (*subnetState, *APIError) {
	switch {
	case subnetID != "":
		if !reSubnetID.MatchString(subnetID) {
			return nil, errMalformedID("InvalidSubnetID.Malformed", subnetID, "subnet-")
		}
		sn := s.subnetLocked(subnetID)
		if sn == nil {
			return nil, newError("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnetID)
		}
		return sn, nil
	case zone != "":
		for _, cand := range s.subnets {
			if cand.Zone == zone {
				return cand, nil
			}
		}
		return nil, newError(CodeInvalidParameterValue, "Invalid availability zone: [%s]", zone)
	default:
		return s.subnets[0], nil
	}
}

// runInstances is EC2's RunInstances, read in the order EC2 handles it:
// the request's checks (parseRunRequest), the launch template, instance
// type, image and subnet, the capacity fault, then MaxCount launches of
// which MinCount must succeed.
func (s *Simulator) runInstances(req *request) (any, error) {
	rr, ae := parseRunRequest(req.p)
	if ae != nil {
		return nil, ae
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	p, ct := req.p, rr.capacityType
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
	sn, ae := s.runSubnetLocked(p.str("SubnetId"), p.str("Placement.AvailabilityZone"))
	if ae != nil {
		return nil, ae
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
	behavior, userData := lt.behavior, lt.userData
	if rr.userData {
		behavior, userData = rr.udBehavior, rr.rawUserData
	}
	out := &runInstancesResponse{xmlReservation: xmlReservation{ReservationID: s.ids.next("r-"), OwnerID: s.cfg.AccountID}}
	inUse := s.inUseAddressesLocked(req.now)
	for i := range rr.maxCount {
		in, ae := s.launchLocked(req.now, launchParams{instanceType: itype, imageID: img.ID, arch: img.Architecture, subnet: sn,
			capacityType: ct, tags: lt.instanceTags.set(rr.tags...), sgIDs: sgs, baseBehavior: behavior, userData: userData, ltID: lt.id, ltName: lt.name,
			reservationID: out.ReservationID, launchIndex: i}, inUse)
		if ae != nil {
			if i < rr.minCount {
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
