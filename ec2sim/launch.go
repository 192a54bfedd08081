package ec2sim

import (
	"strings"
	"time"

	"github.com/karpx/karpx/catalog"
)

// The launch core that CreateFleet (action_fleet.go) and RunInstances
// (action_runinstances.go) share: one pending instance per launchLocked
// call, the private addresses in use, the AMI checks and EC2's
// insufficient-capacity answer.

// launchParams is everything needed to launch one instance.
type launchParams struct {
	instanceType, imageID, arch string
	subnet                      *subnetState
	capacityType                string
	tags                        tagSet
	sgIDs                       []string
	baseBehavior                Behavior
	userData                    string // decoded; what the emulated kubelet registers with (registration.go)
	ltID, ltName, ltVersion     string
	fleetID, reservationID      string
	launchIndex                 int
	// capacityReservationID is the capacity reservation the instance
	// takes a place in ("" for none), crPreference its launch template's
	// CapacityReservationPreference and crTarget its target, capacityBlock whether the
	// reservation is a Capacity Block (capacityreservations.go).
	capacityReservationID, crPreference, crTarget string
	capacityBlock                                 bool
	// blockReclaimAt is when the Capacity Block's end terminates the
	// instance; zero for none.
	blockReclaimAt time.Time
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
		userData: lp.userData, capacityReservationID: lp.capacityReservationID, crPreference: lp.crPreference,
		crTarget: lp.crTarget, capacityBlock: lp.capacityBlock, blockReclaimAt: lp.blockReclaimAt,
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
