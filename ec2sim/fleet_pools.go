package ec2sim

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/karpx/karpx/catalog"
)

// The capacity pools of a CreateFleet request: every launch template
// override expanded into one pool per subnet (fleetPoolsLocked), ordered the
// way the allocation strategy tries them (sortFleetPools) and picked one
// launch at a time (pickFleetPoolLocked).

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
	// reservation is the launch template's capacity reservation request.
	reservation launchReservation
}

// fleetFailFunc reports a pool (or a launch template, with a nil override)
// that CreateFleet could not use in the response's errorSet.
type fleetFailFunc func(spec xmlFleetLTSpec, echo *xmlFleetOverrides, ae *APIError)

// fleetPoolsLocked validates one override and expands it into its pools
// (one per zone when it names neither subnet nor zone). Invalid overrides
// are reported through fail; the checks of one override stand in the order
// EC2 reports their errors. order is the request position of the first
// pool, the last tie-breaker of sortFleetPools.
func (s *Simulator) fleetPoolsLocked(spec xmlFleetLTSpec, lt *launchTemplate, ov params, ct string, order int,
	fail fleetFailFunc) []*fleetPool {
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
	subnets, ae := s.fleetSubnetsLocked(echo)
	if ae != nil {
		fail(spec, &echo, ae)
		return nil
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
		pools = append(pools, &fleetPool{spec: spec, echo: e, priority: priority, price: price, order: order + len(pools), reservation: lt.reservation,
			lp: launchParams{instanceType: itype, imageID: img.ID, arch: img.Architecture, subnet: sn, capacityType: ct,
				tags: lt.instanceTags, sgIDs: lt.sgIDs, baseBehavior: lt.behavior, userData: lt.userData, ltID: lt.id, ltName: lt.name,
				ltVersion: "1", crPreference: lt.reservation.preference, crTarget: lt.reservation.targetID}})
	}
	return pools
}

// fleetSubnetsLocked returns the subnets an override's pools launch into:
// its SubnetId (in its AvailabilityZone, when it names both), the first
// subnet of its AvailabilityZone, or the first subnet of every zone when it
// names neither.
func (s *Simulator) fleetSubnetsLocked(echo xmlFleetOverrides) ([]*subnetState, *APIError) {
	var subnets []*subnetState
	switch {
	case echo.SubnetID != "":
		if !reSubnetID.MatchString(echo.SubnetID) {
			return nil, errMalformedID("InvalidSubnetID.Malformed", echo.SubnetID, "subnet-")
		}
		sn := s.subnetLocked(echo.SubnetID)
		if sn == nil {
			return nil, newError("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", echo.SubnetID)
		}
		if echo.AvailabilityZone != "" && echo.AvailabilityZone != sn.Zone {
			return nil, newError(CodeInvalidParameterValue, "The subnet '%s' is not in Availability Zone '%s'.", sn.ID, echo.AvailabilityZone)
		}
		return []*subnetState{sn}, nil
	case echo.AvailabilityZone != "":
		if !contains(s.cfg.Zones, echo.AvailabilityZone) {
			return nil, newError(CodeInvalidParameterValue, "Invalid availability zone: [%s]", echo.AvailabilityZone)
		}
		for _, sn := range s.subnets {
			if sn.Zone == echo.AvailabilityZone {
				subnets = append(subnets, sn)
				break
			}
		}
		if len(subnets) == 0 {
			return nil, newError(CodeInvalidParameterValue, "No subnet in Availability Zone '%s'.", echo.AvailabilityZone)
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
	return subnets, nil
}

// sortFleetPools orders pools the way the allocation strategy tries them:
// by Priority first (lowest first, unset last) for the prioritized
// strategies, then by price (USD per hour, unknown last), then in request
// order.
func sortFleetPools(pools []*fleetPool, strategy string) {
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
}

// pickFleetPoolLocked returns the pool of the next launch: the first one,
// from cursor on and wrapping around, that is not refused. A pool an
// insufficient-capacity fault refuses now, or whose capacity reservation
// refuses it (reservationForLaunchLocked: a full targeted reservation is
// ReservationCapacityExceeded), is marked refused and reported through
// fail; the chosen pool's launch parameters name the reservation it takes
// a place in. ct is the fleet's DefaultTargetCapacityType. It also returns the cursor of the next pick: the pool after
// the chosen one when diversified (round robin), cursor otherwise. It
// returns nil when every pool is refused.
func (s *Simulator) pickFleetPoolLocked(now time.Time, pools []*fleetPool, cursor int, ct string, diversified bool, fail fleetFailFunc) (*fleetPool, int) {
	for k := range pools {
		pl := pools[(cursor+k)%len(pools)]
		if pl.refused {
			continue
		}
		if s.faults.insufficient(pl.lp.instanceType, pl.lp.subnet.Zone, pl.lp.capacityType) {
			pl.refused = true
			fail(pl.spec, &pl.echo, s.errInsufficientCapacity(pl.lp.instanceType, pl.lp.subnet.Zone, pl.lp.capacityType))
			continue
		}
		crID, ae := s.reservationForLaunchLocked(pl.reservation, pl.lp.instanceType, pl.lp.subnet.Zone, ct, now)
		if ae != nil {
			pl.refused = true
			fail(pl.spec, &pl.echo, ae)
			continue
		}
		pl.lp.capacityReservationID = crID
		pl.lp.capacityBlock = crID != "" && s.reservations[crID].ReservationType == ReservationTypeCapacityBlock
		if pl.lp.capacityBlock {
			pl.lp.blockReclaimAt = s.reservations[crID].terminationStart(s.blockLeadLocked())
		}
		if diversified {
			cursor = (cursor + k + 1) % len(pools)
		}
		return pl, cursor
	}
	return nil, cursor
}
