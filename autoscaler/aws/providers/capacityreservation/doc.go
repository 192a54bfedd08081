// Package capacityreservation resolves an EC2NodeClass's
// spec.capacityReservationSelectorTerms to EC2 capacity reservations
// (on-demand capacity reservations and Capacity Blocks for ML) with
// DescribeCapacityReservations, and keeps a local count of each
// reservation's free places between descriptions, as Karpenter's
// pkg/providers/capacityreservation@v1.14.0 does.
//
// A term with an id becomes one call naming that reservation; a term with
// tags, ownerID or instanceMatchCriteria one call with the matching
// filters (tag:<key>, tag-key for "*", owner-id,
// instance-match-criteria). Every call asks for state "active" only. The
// results of all terms are ORed, deduplicated by id, cached per set of
// terms for cache.DefaultTTL, and stripped of reservations whose end has
// passed. A term naming an unknown id selects nothing (EC2 answers
// InvalidCapacityReservationId.NotFound).
//
// Provider.Handler serves each described reservation's total and free
// places (package reservationreport) for `kubectl karpx status` and
// `explain`, since status.capacityReservations carries no counts.
package capacityreservation
