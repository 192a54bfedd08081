// Package reservationreport holds what the controller serves about the
// capacity reservations it resolved, for `kubectl karpx status` and
// `kubectl karpx explain pod`: each reservation's size and free places
// (Report, at HandlerPath), which status.capacityReservations of the
// EC2NodeClass, as Karpenter v1.14 defines it, does not carry. It imports
// nothing of the AWS SDK or controller-runtime, so the plugin links it
// alone.
package reservationreport

import "time"

// ReservedPriceDivisor divides an instance type's on-demand price into
// the price of its reserved offerings, so that reserved capacity, already
// paid for, is chosen before spot and on-demand while consolidation keeps
// the types' relative order (Karpenter's ReservedCapacityResolver@v1.14.0
// uses the same 10,000,000). The AWS cloud provider and `kubectl karpx
// explain` both price reserved offerings with it.
const ReservedPriceDivisor = 10_000_000.0

// HandlerPath is where the controller serves its Report on its status
// address (--status-bind-address).
const HandlerPath = "/capacityreservations"

// Report is the controller's view of every capacity reservation its
// EC2NodeClasses' capacityReservationSelectorTerms resolved, as JSON at
// HandlerPath. It is empty while the ReservedCapacity feature gate is off.
type Report struct {
	// Reservations are sorted by ID.
	Reservations []Reservation `json:"reservations"`
}

// Reservation is one capacity reservation's counts.
type Reservation struct {
	// ID is the reservation id, "cr-" and 17 hex digits.
	ID string `json:"id"`
	// InstanceType and Zone are what it reserves and where.
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	// Type is "default" or "capacity-block".
	Type string `json:"type"`
	// Total is EC2's TotalInstanceCount: the instances it holds.
	Total int `json:"total"`
	// Available is its free places as the controller counts them: EC2's
	// AvailableInstanceCount when last described, less the launches into
	// it since, 0 once a launch found it full.
	Available int `json:"available"`
	// Described is when EC2 last described it.
	Described time.Time `json:"described"`
	// End is when it ends (zero for none).
	End time.Time `json:"end,omitzero"`
}

// Find returns the reservation id of r, if present.
func (r *Report) Find(id string) (Reservation, bool) {
	if r == nil {
		return Reservation{}, false
	}
	for _, x := range r.Reservations {
		if x.ID == id {
			return x, true
		}
	}
	return Reservation{}, false
}
