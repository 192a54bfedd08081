package ec2sim

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"time"

	"github.com/karpx/karpx/catalog"
)

// Capacity reservations: on-demand capacity reservations (ODCRs,
// reservation type "default") and Capacity Blocks for ML (reservation
// type "capacity-block"), defined through AddCapacityReservation (or POST
// /_sim/capacity-reservations), listed by DescribeCapacityReservations and
// filled by the instances CreateFleet launches into them.
//
// A reservation holds TotalInstanceCount instances of one instance type in
// one zone. Every instance launched into it and not yet terminated takes
// one place; AvailableInstanceCount is what is left. It is "scheduled"
// before its StartDate, "active" until its EndDate, "expired" from then on
// and "cancelled" once CancelCapacityReservation ended it (EC2 API
// Reference, CapacityReservation.State; EC2 User Guide, "View Capacity
// Blocks": a Capacity Block goes from active to expired at its end date).
//
// How a reservation ends, as EC2 does it:
//   - an ODCR that expires or is cancelled leaves its instances running;
//     they lose their association with it and run as plain on-demand
//     instances (EC2 User Guide, "Cancel a Capacity Reservation" and
//     Karpenter's designs/odcr.md@v1.14.3): DescribeInstances no longer
//     shows their capacityReservationId.
//   - a Capacity Block's instances still running CapacityBlockTerminationLead
//     (30 minutes) before its end go shutting-down, then terminated (state
//     reason Server.ScheduledStop), and their Nodes go as a kubelet's do;
//     from then on the block takes no launch (AvailableInstanceCount 0)
//     although it stays "active" until its end. The time comes from
//     Config.Clock, so tests move it deterministically;
//     SetCapacityBlockTerminationLead shortens the lead for scenarios that
//     must not wait 10 minutes between a controller's drain and EC2's.
//
// Which launches a reservation takes (EC2 User Guide, "Capacity
// Reservations", instance match criteria; EC2 API Reference,
// LaunchTemplateCapacityReservationSpecificationRequest): a launch whose
// launch template targets a reservation
// (CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId,
// as Karpenter's launch templates for capacity type "reserved" do) goes
// into that reservation or fails; an on-demand launch with preference
// "open" (the default) goes into an active open reservation of its type
// and zone when one has room, and runs as plain on-demand otherwise; a
// launch with preference "none" and spot launches never use a reservation.

// Reservation types (EC2 API Reference, CapacityReservation.ReservationType).
const (
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"
)

// Instance match criteria (EC2 API Reference,
// CapacityReservation.InstanceMatchCriteria).
const (
	MatchCriteriaOpen     = "open"
	MatchCriteriaTargeted = "targeted"
)

// Capacity reservation states the simulator reports (EC2 API Reference,
// CapacityReservation.State).
const (
	ReservationStateScheduled = "scheduled"
	ReservationStateActive    = "active"
	ReservationStateExpired   = "expired"
	ReservationStateCancelled = "cancelled"
)

// Capacity reservation preferences of a launch template (EC2 API
// Reference, LaunchTemplateCapacityReservationSpecificationRequest).
const (
	crPreferenceOpen = "open"
	crPreferenceNone = "none"
	crPreferenceOnly = "capacity-reservations-only"
)

// marketTypeCapacityBlock is InstanceMarketOptions.MarketType of a launch
// into a Capacity Block (EC2 API Reference, MarketType).
const marketTypeCapacityBlock = "capacity-block"

// CapacityBlockTerminationLead is how long before a Capacity Block's end
// EC2 begins terminating the instances still running in it: 30 minutes
// (EC2 User Guide, "Work with Capacity Blocks": "Thirty minutes before the
// reservation expires, we begin to terminate any instances that are still
// running in the Capacity Block"; "Monitor Capacity Blocks using
// EventBridge": the expiration warning comes 40 minutes before the end,
// 10 minutes before the terminations begin). The simulator's default;
// SetCapacityBlockTerminationLead changes it.
const CapacityBlockTerminationLead = 30 * time.Minute

// stateReasonCapacityBlock is the StateReason code of an instance EC2
// terminated because its Capacity Block ended. The EC2 API Reference's
// StateReason list has no code for this; the simulator reports
// Server.ScheduledStop, the listed code for an end EC2 scheduled.
const stateReasonCapacityBlock = "Server.ScheduledStop"

// maxCapacityReservationResults is the largest MaxResults of
// DescribeCapacityReservations (1..1000, EC2 API Reference; Karpenter's
// capacityreservation provider@v1.14.0 asks for 1000). It is also the page
// size when MaxResults is absent.
const maxCapacityReservationResults = 1000

// reCRID is the shape of a capacity reservation id: "cr-" and 17 hex
// digits.
var reCRID = regexp.MustCompile(`^cr-[0-9a-f]{17}$`)

// ErrUnknownCapacityReservation is wrapped by the errors of
// CancelCapacityReservation for an id the simulator does not know.
var ErrUnknownCapacityReservation = errors.New("unknown capacity reservation")

// CapacityReservation defines a capacity reservation for
// AddCapacityReservation and POST /_sim/capacity-reservations.
type CapacityReservation struct {
	// ID is the reservation's id, "cr-" and 17 hex digits; empty for one
	// the simulator picks.
	ID string `json:"id,omitempty"`
	// InstanceType is the reserved instance type, one of the catalogue's.
	InstanceType string `json:"instanceType"`
	// AvailabilityZone is the reservation's zone, one of Config.Zones.
	AvailabilityZone string `json:"availabilityZone"`
	// TotalInstanceCount is how many instances it holds, at least 1.
	TotalInstanceCount int `json:"totalInstanceCount"`
	// ReservationType is "default" (an ODCR; the default) or
	// "capacity-block".
	ReservationType string `json:"reservationType,omitempty"`
	// InstanceMatchCriteria is "open" (the default for ODCRs) or
	// "targeted" (the only one for Capacity Blocks, which EC2 delivers as
	// targeted reservations).
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
	// OwnerID is the 12-digit owning account; empty for Config.AccountID.
	OwnerID string `json:"ownerId,omitempty"`
	// Tags are the reservation's tags.
	Tags map[string]string `json:"tags,omitempty"`
	// StartDate is when it becomes active; zero for now.
	StartDate time.Time `json:"startDate,omitzero"`
	// EndDate is when it expires; zero for no end (EndDateType
	// "unlimited"). Required for a Capacity Block.
	EndDate time.Time `json:"endDate,omitzero"`
}

// CapacityReservationStatus is a reservation as the simulator holds it now
// (GET /_sim/capacity-reservations).
type CapacityReservationStatus struct {
	CapacityReservation
	// State is scheduled, active, expired or cancelled.
	State string `json:"state"`
	// AvailableInstanceCount is TotalInstanceCount minus the instances in
	// it not yet terminated (0 unless active).
	AvailableInstanceCount int `json:"availableInstanceCount"`
	// Instances are the ids of the instances in it not yet terminated.
	Instances []string `json:"instances,omitempty"`
}

// capacityReservation is the simulator's record of one reservation.
// Guarded by Simulator.mu.
type capacityReservation struct {
	CapacityReservation
	tags        tagSet
	created     time.Time
	cancelledAt time.Time
}

// state is the reservation's state at now.
func (cr *capacityReservation) state(now time.Time) string {
	switch {
	case !cr.cancelledAt.IsZero() && !now.Before(cr.cancelledAt):
		return ReservationStateCancelled
	case now.Before(cr.StartDate):
		return ReservationStateScheduled
	case !cr.EndDate.IsZero() && !now.Before(cr.EndDate):
		return ReservationStateExpired
	}
	return ReservationStateActive
}

// terminationStart is when EC2 begins terminating the instances of a
// Capacity Block with lead: lead before its EndDate. It is zero for an
// ODCR.
func (cr *capacityReservation) terminationStart(lead time.Duration) time.Time {
	if cr.ReservationType != ReservationTypeCapacityBlock || cr.EndDate.IsZero() {
		return time.Time{}
	}
	return cr.EndDate.Add(-lead)
}

// blockLeadLocked is the Capacity Block termination lead in force.
func (s *Simulator) blockLeadLocked() time.Duration {
	if s.blockLead > 0 {
		return s.blockLead
	}
	return CapacityBlockTerminationLead
}

// SetCapacityBlockTerminationLead sets how long before a Capacity Block's
// end its instances are terminated (default CapacityBlockTerminationLead,
// EC2's 30 minutes), for every block and instance, already launched or
// not. A scenario shortens it to watch a controller drain the block's
// nodes (40 minutes before the end, as Karpenter does) and EC2 terminate
// what is left soon after, without waiting EC2's 10 minutes between the
// two. It returns an error for a lead that is not positive; then nothing
// changes.
func (s *Simulator) SetCapacityBlockTerminationLead(lead time.Duration) error {
	if lead <= 0 {
		return fmt.Errorf("ec2sim: capacity block termination lead %s must be positive (EC2's is %s)", lead, CapacityBlockTerminationLead)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blockLead = lead
	for _, in := range s.instances {
		if cr := s.reservations[in.capacityReservationID]; cr != nil && in.capacityBlock {
			in.blockReclaimAt = cr.terminationStart(lead)
		}
	}
	return nil
}

// instanceReservationLocked is the reservation DescribeInstances shows for
// in at now: its reservation while that is not expired or cancelled, ""
// once an ODCR ended (its instances run on as plain on-demand, EC2 User
// Guide, "Cancel a Capacity Reservation"). A Capacity Block's instances
// keep the id: they are terminated before the block ends.
func (s *Simulator) instanceReservationLocked(in *instance, now time.Time) string {
	cr := s.reservations[in.capacityReservationID]
	if cr == nil || cr.ReservationType == ReservationTypeCapacityBlock {
		return in.capacityReservationID
	}
	switch cr.state(now) {
	case ReservationStateExpired, ReservationStateCancelled:
		return ""
	}
	return in.capacityReservationID
}

// validate checks a definition and fills its defaults.
func (cr *CapacityReservation) validate(cfg *Config) error {
	if cr.ID != "" && !reCRID.MatchString(cr.ID) {
		return fmt.Errorf("ec2sim: capacity reservation: id %q is not \"cr-\" and 17 hex digits; leave it empty for a generated one", cr.ID)
	}
	if _, ok := catalog.Get(cr.InstanceType); !ok {
		return fmt.Errorf("ec2sim: capacity reservation: instanceType %q is not in the catalogue", cr.InstanceType)
	}
	if !contains(cfg.Zones, cr.AvailabilityZone) {
		return fmt.Errorf("ec2sim: capacity reservation: availabilityZone %q is not one of %v", cr.AvailabilityZone, cfg.Zones)
	}
	if cr.TotalInstanceCount < 1 {
		return fmt.Errorf("ec2sim: capacity reservation: totalInstanceCount %d must be at least 1", cr.TotalInstanceCount)
	}
	switch cr.ReservationType {
	case "":
		cr.ReservationType = ReservationTypeDefault
	case ReservationTypeDefault, ReservationTypeCapacityBlock:
	default:
		return fmt.Errorf("ec2sim: capacity reservation: reservationType %q is not %q or %q", cr.ReservationType, ReservationTypeDefault, ReservationTypeCapacityBlock)
	}
	switch cr.InstanceMatchCriteria {
	case "":
		cr.InstanceMatchCriteria = MatchCriteriaOpen
		if cr.ReservationType == ReservationTypeCapacityBlock {
			cr.InstanceMatchCriteria = MatchCriteriaTargeted
		}
	case MatchCriteriaOpen, MatchCriteriaTargeted:
	default:
		return fmt.Errorf("ec2sim: capacity reservation: instanceMatchCriteria %q is not %q or %q", cr.InstanceMatchCriteria, MatchCriteriaOpen, MatchCriteriaTargeted)
	}
	if cr.ReservationType == ReservationTypeCapacityBlock {
		if cr.InstanceMatchCriteria != MatchCriteriaTargeted {
			return fmt.Errorf("ec2sim: capacity reservation: a capacity block is always targeted; drop instanceMatchCriteria %q", cr.InstanceMatchCriteria)
		}
		if cr.EndDate.IsZero() {
			return fmt.Errorf("ec2sim: capacity reservation: a capacity block needs an endDate")
		}
	}
	if !cr.EndDate.IsZero() && !cr.EndDate.After(cr.StartDate) {
		return fmt.Errorf("ec2sim: capacity reservation: endDate %s is not after startDate %s", cr.EndDate, cr.StartDate)
	}
	if cr.OwnerID == "" {
		cr.OwnerID = cfg.AccountID
	}
	if !reAccountID.MatchString(cr.OwnerID) {
		return fmt.Errorf("ec2sim: capacity reservation: ownerId %q is not a 12-digit account", cr.OwnerID)
	}
	return nil
}

var reAccountID = regexp.MustCompile(`^[0-9]{12}$`)

// AddCapacityReservation defines a reservation and returns its id. A zero
// StartDate is the simulator's now. It returns an error naming the field
// for a definition that validate refuses (unknown instance type or zone,
// count below 1, a capacity block without end or not targeted) or an id
// already in use; then nothing changes.
func (s *Simulator) AddCapacityReservation(cr CapacityReservation) (string, error) {
	now := s.clock.Now()
	if cr.StartDate.IsZero() {
		cr.StartDate = now
	}
	if err := cr.validate(&s.cfg); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reservations == nil {
		s.reservations = map[string]*capacityReservation{}
	}
	if cr.ID == "" {
		cr.ID = s.ids.next("cr-")
	}
	if s.reservations[cr.ID] != nil {
		return "", fmt.Errorf("ec2sim: capacity reservation: id %s is already in use", cr.ID)
	}
	rec := &capacityReservation{CapacityReservation: cr, created: now}
	for k, v := range cr.Tags {
		rec.tags = rec.tags.set(Tag{Key: k, Value: v})
	}
	s.reservations[cr.ID] = rec
	s.reservationOrder = append(s.reservationOrder, cr.ID)
	s.log.Info("Added capacity reservation", "id", cr.ID, "instanceType", cr.InstanceType, "zone", cr.AvailabilityZone,
		"total", cr.TotalInstanceCount, "type", cr.ReservationType, "match", cr.InstanceMatchCriteria, "end", cr.EndDate)
	return cr.ID, nil
}

// CancelCapacityReservation ends a reservation now (state "cancelled", as
// EC2's CancelCapacityReservation does); its instances keep running, as
// plain on-demand instances from then on. It
// returns an error wrapping ErrUnknownCapacityReservation for an unknown
// id.
func (s *Simulator) CancelCapacityReservation(id string) error {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.reservations[id]
	if cr == nil {
		return fmt.Errorf("ec2sim: cancel capacity reservation: %w %s", ErrUnknownCapacityReservation, id)
	}
	if cr.cancelledAt.IsZero() {
		cr.cancelledAt = now
	}
	return nil
}

// CapacityReservations returns every reservation as it is now, in the
// order they were added.
func (s *Simulator) CapacityReservations() []CapacityReservationStatus {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CapacityReservationStatus, 0, len(s.reservationOrder))
	for _, id := range s.reservationOrder {
		cr := s.reservations[id]
		used := s.reservationInstancesLocked(id, now)
		out = append(out, CapacityReservationStatus{CapacityReservation: cr.CapacityReservation, State: cr.state(now),
			AvailableInstanceCount: s.availableLocked(cr, len(used), now), Instances: used})
	}
	return out
}

// reservationInstancesLocked returns the instances in reservation id that
// are not terminated at now, in launch order.
func (s *Simulator) reservationInstancesLocked(id string, now time.Time) []string {
	var out []string
	for _, iid := range s.order {
		in := s.instances[iid]
		if in.capacityReservationID == id && in.state(now, &s.cfg) != StateTerminated {
			out = append(out, iid)
		}
	}
	return out
}

// availableLocked is AvailableInstanceCount: the free places of an active
// reservation with used places taken, 0 in any other state and in a
// Capacity Block's last lead before its end (EC2 terminates its instances
// then; a launch would not outlive the wait).
func (s *Simulator) availableLocked(cr *capacityReservation, used int, now time.Time) int {
	if cr.state(now) != ReservationStateActive {
		return 0
	}
	if t := cr.terminationStart(s.blockLeadLocked()); !t.IsZero() && !now.Before(t) {
		return 0
	}
	return max(cr.TotalInstanceCount-used, 0)
}

// registerCapacityReservationAdmin serves the reservations:
//
//	GET    /_sim/capacity-reservations          [CapacityReservationStatus...]
//	POST   /_sim/capacity-reservations          CapacityReservation → 201 {"id": "cr-..."}; 400 with the field at fault
//	DELETE /_sim/capacity-reservations?id=cr-…  cancels it → 204; 404 unknown
func (s *Simulator) registerCapacityReservationAdmin(mux *http.ServeMux) {
	mux.HandleFunc("/_sim/capacity-reservations", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, s.CapacityReservations())
		case http.MethodPost:
			var cr CapacityReservation
			if !readJSON(w, r, &cr) {
				return
			}
			id, err := s.AddCapacityReservation(cr)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			writeJSON(w, http.StatusCreated, map[string]string{"id": id})
		case http.MethodDelete:
			if err := s.CancelCapacityReservation(r.URL.Query().Get("id")); err != nil {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			methodNotAllowed(w)
		}
	})
}

type xmlCapacityReservation struct {
	CapacityReservationID  string   `xml:"capacityReservationId"`
	OwnerID                string   `xml:"ownerId"`
	CapacityReservationArn string   `xml:"capacityReservationArn"`
	AvailabilityZoneID     string   `xml:"availabilityZoneId"`
	InstanceType           string   `xml:"instanceType"`
	InstancePlatform       string   `xml:"instancePlatform"`
	AvailabilityZone       string   `xml:"availabilityZone"`
	Tenancy                string   `xml:"tenancy"`
	TotalInstanceCount     int      `xml:"totalInstanceCount"`
	AvailableInstanceCount int      `xml:"availableInstanceCount"`
	EbsOptimized           bool     `xml:"ebsOptimized"`
	EphemeralStorage       bool     `xml:"ephemeralStorage"`
	State                  string   `xml:"state"`
	StartDate              string   `xml:"startDate"`
	EndDate                string   `xml:"endDate,omitempty"`
	EndDateType            string   `xml:"endDateType"`
	InstanceMatchCriteria  string   `xml:"instanceMatchCriteria"`
	CreateDate             string   `xml:"createDate"`
	ReservationType        string   `xml:"reservationType"`
	Tags                   []xmlTag `xml:"tagSet>item,omitempty"`
}

type describeCapacityReservationsResponse struct {
	respMeta
	CapacityReservations []xmlCapacityReservation `xml:"capacityReservationSet>item"`
	NextToken            string                   `xml:"nextToken,omitempty"`
}

// capacityReservationXML renders cr at now.
func (s *Simulator) capacityReservationXML(cr *capacityReservation, now time.Time) xmlCapacityReservation {
	used := len(s.reservationInstancesLocked(cr.ID, now))
	x := xmlCapacityReservation{
		CapacityReservationID: cr.ID, OwnerID: cr.OwnerID,
		CapacityReservationArn: "arn:aws:ec2:" + s.cfg.Region + ":" + cr.OwnerID + ":capacity-reservation/" + cr.ID,
		AvailabilityZoneID:     zoneID(s.cfg.Region, cr.AvailabilityZone), InstanceType: cr.InstanceType,
		InstancePlatform: "Linux/UNIX", AvailabilityZone: cr.AvailabilityZone, Tenancy: "default",
		TotalInstanceCount: cr.TotalInstanceCount, AvailableInstanceCount: s.availableLocked(cr, used, now),
		EbsOptimized: true, State: cr.state(now), StartDate: ec2Time(cr.StartDate), EndDateType: "unlimited",
		InstanceMatchCriteria: cr.InstanceMatchCriteria, CreateDate: ec2Time(cr.created), ReservationType: cr.ReservationType,
		Tags: xmlTags(cr.tags),
	}
	if !cr.EndDate.IsZero() {
		x.EndDate, x.EndDateType = ec2Time(cr.EndDate), "limited"
	}
	return x
}

// capacityReservationField answers the filters of
// DescribeCapacityReservations (EC2 API Reference lists them) from a
// rendered reservation.
func capacityReservationField(x *xmlCapacityReservation, name string) ([]string, bool) {
	switch name {
	case "instance-type":
		return one(x.InstanceType), true
	case "owner-id":
		return one(x.OwnerID), true
	case "instance-platform":
		return one(x.InstancePlatform), true
	case "availability-zone":
		return one(x.AvailabilityZone), true
	case "tenancy":
		return one(x.Tenancy), true
	case "outpost-arn", "placement-group-arn":
		return nil, true
	case "state":
		return one(x.State), true
	case "start-date":
		return one(x.StartDate), true
	case "end-date":
		if x.EndDate == "" {
			return nil, true
		}
		return one(x.EndDate), true
	case "end-date-type":
		return one(x.EndDateType), true
	case "instance-match-criteria":
		return one(x.InstanceMatchCriteria), true
	}
	return nil, false
}

// describeCapacityReservations is EC2's DescribeCapacityReservations:
// CapacityReservationId.N (each known, else
// InvalidCapacityReservationId.NotFound; each shaped cr-..., else
// InvalidCapacityReservationId.Malformed), Filter.N, MaxResults (1..1000,
// not with ids: InvalidParameterCombination, as Karpenter's provider notes)
// and NextToken; the reservations in the order they were added.
func (s *Simulator) describeCapacityReservations(req *request) (any, error) {
	fs, err := parseFilters(req.p, &xmlCapacityReservation{}, capacityReservationField)
	if err != nil {
		return nil, err
	}
	ids := req.p.list("CapacityReservationId")
	for _, id := range ids {
		if !reCRID.MatchString(id) {
			return nil, errMalformedID("InvalidCapacityReservationId.Malformed", id, "cr-")
		}
	}
	if len(ids) > 0 && req.p.has("MaxResults") {
		return nil, newError(CodeInvalidParameterCombination, "The parameter capacityReservationIdSet cannot be used with the parameter maxResults")
	}
	offset, size, err := req.p.pageRange(1, maxCapacityReservationResults, maxCapacityReservationResults)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, id := range ids {
		if s.reservations[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, newError("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", quoteList(missing))
	}
	var matched []xmlCapacityReservation
	for _, id := range s.reservationOrder {
		if len(ids) > 0 && !contains(ids, id) {
			continue
		}
		cr := s.reservations[id]
		x := s.capacityReservationXML(cr, req.now)
		ok, ferr := matchFilters(&x, cr.tags, fs, capacityReservationField)
		if ferr != nil {
			return nil, ferr
		}
		if ok {
			matched = append(matched, x)
		}
	}
	lo, hi, next := paginate(len(matched), offset, size)
	return &describeCapacityReservationsResponse{CapacityReservations: matched[lo:hi], NextToken: next}, nil
}

// launchReservation is how a launch template asks to use reservations
// (its CapacityReservationSpecification and InstanceMarketOptions).
type launchReservation struct {
	preference string // crPreferenceOpen (default), crPreferenceNone or crPreferenceOnly
	targetID   string // CapacityReservationTarget.CapacityReservationId, "" for none
	marketType string // InstanceMarketOptions.MarketType, "" for on-demand
}

// parseLaunchReservation reads a launch template's reservation settings
// with EC2's codes for bad values.
func parseLaunchReservation(data params) (launchReservation, *APIError) {
	lr := launchReservation{
		preference: data.str("CapacityReservationSpecification.CapacityReservationPreference"),
		targetID:   data.str("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"),
		marketType: data.str("InstanceMarketOptions.MarketType"),
	}
	switch lr.preference {
	case "":
		lr.preference = crPreferenceOpen
	case crPreferenceOpen, crPreferenceNone, crPreferenceOnly:
	default:
		return lr, errInvalidValue(lr.preference, "CapacityReservationPreference")
	}
	if lr.targetID != "" && !reCRID.MatchString(lr.targetID) {
		return lr, errMalformedID("InvalidCapacityReservationId.Malformed", lr.targetID, "cr-")
	}
	switch lr.marketType {
	case "", capacitySpot, capacityOnDemand, marketTypeCapacityBlock:
	default:
		return lr, errInvalidValue(lr.marketType, "MarketType")
	}
	if lr.marketType == marketTypeCapacityBlock && lr.targetID == "" {
		return lr, newError(CodeInvalidParameterCombination, "A launch with MarketType capacity-block must target a Capacity Block with CapacityReservationTarget.")
	}
	return lr, nil
}

// reservationForLaunchLocked decides which reservation, if any, one launch
// of instanceType in zone takes, for a launch template asking lr and a
// fleet of capacity type ct ("on-demand", "spot" or "capacity-block"). It
// returns "" for a launch outside every reservation, or the error EC2
// reports for the pool: InvalidCapacityReservationId.NotFound (unknown
// target), InvalidParameterCombination (a target of another instance type
// or zone, a capacity-block fleet or market type with an ODCR or without a
// target), ReservationCapacityExceeded (a target that is full or not
// active), InsufficientInstanceCapacity (capacity-reservations-only and no
// open reservation has room). The texts of these messages are the
// simulator's; the codes are those of EC2 and of Karpenter's
// errors.go@v1.14.0.
func (s *Simulator) reservationForLaunchLocked(lr launchReservation, instanceType, zone, ct string, now time.Time) (string, *APIError) {
	block := ct == marketTypeCapacityBlock || lr.marketType == marketTypeCapacityBlock
	if ct == capacitySpot || lr.marketType == capacitySpot {
		if block {
			return "", newError(CodeInvalidParameterCombination, "Spot and capacity-block launches cannot be combined.")
		}
		return "", nil
	}
	if lr.targetID != "" {
		cr := s.reservations[lr.targetID]
		if cr == nil {
			return "", newError("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", lr.targetID)
		}
		if cr.InstanceType != instanceType || cr.AvailabilityZone != zone {
			return "", newError(CodeInvalidParameterCombination, "Capacity Reservation %s reserves %s in %s, not %s in %s.",
				cr.ID, cr.InstanceType, cr.AvailabilityZone, instanceType, zone)
		}
		if block != (cr.ReservationType == ReservationTypeCapacityBlock) {
			return "", newError(CodeInvalidParameterCombination,
				"Capacity Reservation %s is of type %s; launches into it need DefaultTargetCapacityType and MarketType %s.",
				cr.ID, cr.ReservationType, map[bool]string{true: "capacity-block", false: "on-demand"}[cr.ReservationType == ReservationTypeCapacityBlock])
		}
		if s.availableLocked(cr, len(s.reservationInstancesLocked(cr.ID, now)), now) == 0 {
			return "", newError("ReservationCapacityExceeded", "Insufficient capacity in Capacity Reservation %s (state %s).", cr.ID, cr.state(now))
		}
		return cr.ID, nil
	}
	if block {
		return "", newError(CodeInvalidParameterCombination, "A capacity-block launch must target a Capacity Block with CapacityReservationTarget.")
	}
	if lr.preference == crPreferenceNone {
		return "", nil
	}
	ids := append([]string(nil), s.reservationOrder...)
	sort.Strings(ids)
	for _, id := range ids {
		cr := s.reservations[id]
		if cr.InstanceMatchCriteria != MatchCriteriaOpen || cr.ReservationType != ReservationTypeDefault ||
			cr.InstanceType != instanceType || cr.AvailabilityZone != zone {
			continue
		}
		if s.availableLocked(cr, len(s.reservationInstancesLocked(id, now)), now) > 0 {
			return id, nil
		}
	}
	if lr.preference == crPreferenceOnly {
		return "", s.errInsufficientCapacity(instanceType, zone, capacityOnDemand)
	}
	return "", nil
}
