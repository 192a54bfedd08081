package ec2sim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"strings"
	"time"
)

// Instance states and their EC2 state codes (InstanceState.Code).
const (
	StatePending      = "pending"       // code 0
	StateRunning      = "running"       // code 16
	StateShuttingDown = "shutting-down" // code 32
	StateTerminated   = "terminated"    // code 48
)

var stateCodes = map[string]int{StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48}

const (
	capacityOnDemand = "on-demand"
	capacitySpot     = "spot"
)

// Instance is a snapshot of a simulated EC2 instance, as served by
// /_sim/instances.
type Instance struct {
	// ID is the instance id, "i-" and 17 hex digits.
	ID string `json:"id"`
	// InstanceType is the EC2 instance type, e.g. "m5.large".
	InstanceType string `json:"instanceType"`
	// Zone is the availability zone name.
	Zone string `json:"zone"`
	// SubnetID is the subnet the instance was launched into.
	SubnetID string `json:"subnetId"`
	// ImageID is the AMI the instance was launched from.
	ImageID string `json:"imageId"`
	// CapacityType is "on-demand" or "spot".
	CapacityType string `json:"capacityType"`
	// State is pending, running, shutting-down or terminated.
	State string `json:"state"`
	// PrivateIP is the primary private IPv4 address.
	PrivateIP string `json:"privateIp"`
	// PrivateDNSName is the EC2 private DNS name and the Node name.
	PrivateDNSName string `json:"privateDnsName"`
	// Tags are the instance tags.
	Tags map[string]string `json:"tags"`
	// LaunchTime is when the instance was launched.
	LaunchTime time.Time `json:"launchTime"`
	// TerminationTime is when termination was requested, or when a spot
	// interruption reclaimed it, if either happened.
	TerminationTime *time.Time `json:"terminationTime,omitempty"`
	// SpotReclaimTime is when a spot interruption warning (Interrupt)
	// terminates, or terminated, the instance.
	SpotReclaimTime *time.Time `json:"spotReclaimTime,omitempty"`
	// StateReason is the code of DescribeInstances' stateReason once it is
	// shutting down: Client.UserInitiatedShutdown (TerminateInstances) or
	// Server.SpotInstanceTermination (spot interruption).
	StateReason string `json:"stateReason,omitempty"`
	// FleetID is the CreateFleet request that launched it ("" for RunInstances).
	FleetID string `json:"fleetId,omitempty"`
	// LaunchTemplateID is the launch template it was launched from.
	LaunchTemplateID string `json:"launchTemplateId,omitempty"`
	// Behavior is the scripted kubelet behaviour, in marker syntax.
	Behavior string `json:"behavior,omitempty"`
	// NodeName is the Node created for it, once it joined.
	NodeName string `json:"nodeName,omitempty"`
	// IAMInstanceProfile is the name of the IAM instance profile of its
	// launch template, "" for none.
	IAMInstanceProfile string `json:"iamInstanceProfile,omitempty"`
	// CapacityReservationID is the capacity reservation it runs in, ""
	// for none and once its ODCR expired or was cancelled (as
	// DescribeInstances shows it).
	CapacityReservationID string `json:"capacityReservationId,omitempty"`
}

// instance is the simulator's record of one instance. Guarded by Simulator.mu.
type instance struct {
	id, instanceType, zone, subnetID, vpcID, imageID string
	privateIP, privateDNS, capacityType, arch        string
	reservationID, fleetID, ltID, ltName, ltVersion  string
	securityGroups                                   []string
	tags                                             tagSet
	launchTime, terminatedAt                         time.Time
	launchIndex                                      int
	iamInstanceProfile                               string   // from the launch template
	baseBehavior                                     Behavior // from the launch template's user data
	userData                                         string   // decoded user data (launch template or RunInstances)
	behavior                                         Behavior // baseBehavior with the behaviour tag applied
	// kubelet emulation progress
	node nodeProgress
	// reclaimAt is when a spot interruption (Interrupt) terminates the
	// instance; zero when none is pending.
	reclaimAt time.Time
	// notified is how many of transitions() were sent as state-change
	// events (events.go).
	notified int
	// statusFault is the status checks FailStatusChecks made fail.
	statusFault statusFault
	// scheduledEvents are the scheduled events Interrupt announced
	// (instance-retirement, instance-reboot), which DescribeInstanceStatus
	// lists.
	scheduledEvents []scheduledEvent
	// conditionFaults are the Node conditions SetNodeCondition keeps
	// posted, one per type (nodeconditions.go).
	conditionFaults []NodeConditionFault
	// capacityReservationID is the reservation the instance runs in, ""
	// for none; crPreference the CapacityReservationPreference of its
	// launch template and crTarget its CapacityReservationTarget; capacityBlock whether it was launched into a
	// Capacity Block (instanceLifecycle "capacity-block").
	capacityReservationID, crPreference, crTarget string
	capacityBlock                                 bool
	// blockReclaimAt is when EC2 terminates the instance because its
	// Capacity Block ends (capacityreservations.go); zero for none.
	blockReclaimAt time.Time
}

// endedAt is when the instance started shutting down: the terminate
// request, or the first of the spot reclaim and the Capacity Block's end
// once its time has come; zero while it has not.
func (in *instance) endedAt(now time.Time) time.Time {
	if !in.terminatedAt.IsZero() {
		return in.terminatedAt
	}
	var end time.Time
	for _, t := range []time.Time{in.reclaimAt, in.blockReclaimAt} {
		if !t.IsZero() && !now.Before(t) && (end.IsZero() || t.Before(end)) {
			end = t
		}
	}
	return end
}

// spotReclaimed reports whether EC2 (a spot interruption), not a
// TerminateInstances call or a Capacity Block's end, ended the instance.
func (in *instance) spotReclaimed(now time.Time) bool {
	end := in.endedAt(now)
	return in.terminatedAt.IsZero() && !end.IsZero() && end.Equal(in.reclaimAt)
}

// blockReclaimed reports whether the end of its Capacity Block, not a
// TerminateInstances call or a spot reclaim, ended the instance.
func (in *instance) blockReclaimed(now time.Time) bool {
	end := in.endedAt(now)
	return in.terminatedAt.IsZero() && !end.IsZero() && end.Equal(in.blockReclaimAt) && !end.Equal(in.reclaimAt)
}

// state derives the EC2 state from the timestamps: pending for PendingDelay
// after launch, then running; shutting-down for ShuttingDownDelay after a
// terminate request, then terminated.
func (in *instance) state(now time.Time, cfg *Config) string {
	if end := in.endedAt(now); !end.IsZero() {
		if now.Sub(end) < cfg.ShuttingDownDelay {
			return StateShuttingDown
		}
		return StateTerminated
	}
	if now.Sub(in.launchTime) < cfg.PendingDelay {
		return StatePending
	}
	return StateRunning
}

// runningSince is when the instance became running.
func (in *instance) runningSince(cfg *Config) time.Time { return in.launchTime.Add(cfg.PendingDelay) }

func (in *instance) snapshot(now time.Time, cfg *Config) Instance {
	out := Instance{
		ID: in.id, InstanceType: in.instanceType, Zone: in.zone, SubnetID: in.subnetID, ImageID: in.imageID,
		CapacityType: in.capacityType, State: in.state(now, cfg), PrivateIP: in.privateIP,
		PrivateDNSName: in.privateDNS, Tags: in.tags.asMap(), LaunchTime: in.launchTime,
		FleetID: in.fleetID, LaunchTemplateID: in.ltID, Behavior: in.behavior.String(), NodeName: in.node.name,
		IAMInstanceProfile: in.iamInstanceProfile, CapacityReservationID: in.capacityReservationID,
	}
	if end := in.endedAt(now); !end.IsZero() {
		out.TerminationTime = &end
		out.StateReason = in.stateReasonCode(now)
	}
	if !in.reclaimAt.IsZero() {
		t := in.reclaimAt
		out.SpotReclaimTime = &t
	}
	return out
}

// launchTemplate is a stored launch template (only version 1 exists).
type launchTemplate struct {
	id, name     string
	created      time.Time
	tags         tagSet
	imageID      string
	instanceType string
	userData     string // decoded
	sgIDs        []string
	instanceTags tagSet
	behavior     Behavior
	// iamInstanceProfile is IamInstanceProfile.Name (or the name part of
	// IamInstanceProfile.Arn).
	iamInstanceProfile string
	// reservation is its CapacityReservationSpecification and
	// InstanceMarketOptions (capacityreservations.go).
	reservation launchReservation
}

// idGen makes deterministic, realistic-looking resource ids.
type idGen struct{ rng *rand.Rand }

func newIDGen(seed uint64) *idGen { return &idGen{rng: rand.New(rand.NewPCG(seed, 0x1d5))} }

// next returns prefix followed by 17 hex digits, e.g. "i-0a1b2c3d4e5f60718".
func (g *idGen) next(prefix string) string { return fmt.Sprintf("%s0%016x", prefix, g.rng.Uint64()) }

// uuid returns a UUID-shaped id, as fleet ids are.
func (g *idGen) uuid(prefix string) string {
	a, b := g.rng.Uint64(), g.rng.Uint64()
	return fmt.Sprintf("%s%08x-%04x-%04x-%04x-%012x", prefix, a>>32, (a>>16)&0xffff, a&0xffff, b>>48, b&0xffffffffffff)
}

var (
	reInstanceID = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	reLTID       = regexp.MustCompile(`^lt-([0-9a-f]{8}|[0-9a-f]{17})$`)
	reSubnetID   = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	reSGID       = regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`)
	reAMIID      = regexp.MustCompile(`^ami-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

// subnetState tracks private address allocation in a subnet.
type subnetState struct {
	Subnet
	prefix netip.Prefix
	next   netip.Addr
	size   int
}

func newSubnetState(sn Subnet) *subnetState {
	p := netip.MustParsePrefix(sn.CIDR).Masked()
	// AWS reserves the first four addresses and the last one of a subnet.
	a := p.Addr()
	for range 4 {
		a = a.Next()
	}
	return &subnetState{Subnet: sn, prefix: p, next: a, size: 1 << (32 - p.Bits())}
}

// allocate returns the next free private address, wrapping around (addresses
// of long-terminated instances are reused, as in EC2).
func (ss *subnetState) allocate(inUse map[string]bool) (netip.Addr, bool) {
	for range ss.size {
		a := ss.next
		ss.next = a.Next()
		if !ss.prefix.Contains(ss.next) || !ss.prefix.Contains(ss.next.Next()) {
			ss.next = ss.prefix.Addr()
			for range 4 {
				ss.next = ss.next.Next()
			}
		}
		if !inUse[a.String()] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// privateDNSName is EC2's private DNS name for an address: ip-10-0-1-23.ec2.internal
// in us-east-1, ip-10-0-1-23.<region>.compute.internal elsewhere.
func privateDNSName(ip netip.Addr, region string) string {
	host := "ip-" + strings.ReplaceAll(ip.String(), ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}

// zoneID returns the AZ id of a zone: use1-az1 for us-east-1a.
func zoneID(region, zone string) string {
	parts := strings.Split(region, "-")
	short := parts[0]
	if len(parts) == 3 {
		dir := map[string]string{"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
			"northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}[parts[1]]
		if dir == "" {
			dir = parts[1][:1]
		}
		short += dir + parts[2]
	}
	suffix := zone[len(region):]
	return fmt.Sprintf("%s-az%d", short, int(suffix[0]-'a')+1)
}
