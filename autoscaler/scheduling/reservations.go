package scheduling

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// ReservationsAnnotationKey is the annotation NodeClaimPlan.NodeClaim
// writes on a NodeClaim whose plan holds places in capacity reservations:
// their ids, comma-separated and sorted. Until the NodeClaim is launched
// (status.providerID set) the places are counted as taken
// (ExistingNode.Reservations): the cloud provider's count only drops at
// the launch. Karpenter v1.14.0 keeps the same holdings in memory between
// the scheduler and the launch (the karpenter.k8s.aws/capacity-reservation-id
// requirement FinalizeScheduling adds); karpx's launch falls back to
// on-demand when the reservation filled meanwhile, so it records them
// beside the requirements instead.
const ReservationsAnnotationKey = "karpx.io/capacity-reservations"

// reservationLedger counts the free places of each capacity reservation
// during one Solve call, as Karpenter v1.14.0's ReservationManager
// (pkg/controllers/provisioning/scheduling/reservationmanager.go) does:
// a plan holds one place in every reservation of the reserved offerings it
// may still launch into (pessimistically, all of them), and gives the
// place back when adding a pod narrows those offerings away. A reserved
// offering of a reservation with no place left is not usable by a plan
// that does not already hold one.
type reservationLedger struct {
	// ids are the reservation ids, by ledger index; index is the reverse.
	ids   []string
	index map[string]int
	// offered is the smallest Offering.ReservationCapacity among the
	// reservation's available offerings (NodePools may see different
	// counts when their instance types were listed at different times).
	offered []int
	// inFlight are the places ExistingNodes (NodeClaims not launched yet)
	// hold; planned those this Solve's plans hold; free is
	// offered - inFlight - planned, never below 0.
	inFlight []int
	planned  []int
	free     []int
	// where is "<instance type> in <zone>" of each reservation.
	where []string
}

// newReservationLedger collects the reserved offerings of in's NodePools
// and the places in.ExistingNodes hold. It returns nil when no NodePool
// has a reserved offering, so that Solve pays nothing without them.
func newReservationLedger(in Input) *reservationLedger {
	var l *reservationLedger
	for _, np := range in.NodePools {
		for _, it := range np.InstanceTypes {
			if it == nil {
				continue
			}
			for k, o := range it.Offerings {
				if k >= maxOfferings || !isReservation(o) || !o.Available {
					continue
				}
				if l == nil {
					l = &reservationLedger{index: map[string]int{}}
				}
				r, ok := l.index[o.ReservationID]
				if !ok {
					r = len(l.ids)
					l.index[o.ReservationID] = r
					l.ids = append(l.ids, o.ReservationID)
					l.offered = append(l.offered, max(o.ReservationCapacity, 0))
					l.where = append(l.where, it.Name+" in "+o.Zone)
					continue
				}
				l.offered[r] = min(l.offered[r], max(o.ReservationCapacity, 0))
			}
		}
	}
	if l == nil {
		return nil
	}
	l.inFlight, l.planned, l.free = make([]int, len(l.ids)), make([]int, len(l.ids)), make([]int, len(l.ids))
	for _, n := range in.ExistingNodes {
		for _, id := range n.Reservations {
			if r, ok := l.index[id]; ok {
				l.inFlight[r]++
			}
		}
	}
	for r := range l.ids {
		l.free[r] = max(l.offered[r]-l.inFlight[r], 0)
	}
	return l
}

// isReservation reports whether o is an offering of a capacity
// reservation.
func isReservation(o cloudprovider.Offering) bool {
	return o.CapacityType == cloudprovider.CapacityTypeReserved && o.ReservationID != ""
}

// addReservations records, for the type just appended to p.types, which
// of its usable offerings (mask) are in a reservation of the ledger;
// nothing when the Solve call has no ledger.
func (p *pool) addReservations(it *cloudprovider.InstanceType, mask uint64) {
	l := p.ledger
	if l == nil {
		// No reservation in the Solve call: nothing to index (anyReserved
		// stays false, so reservedMask is never read).
		return
	}
	var reserved uint64
	var idx []int
	{
		for k, o := range it.Offerings {
			if k >= maxOfferings || mask&(1<<k) == 0 || !isReservation(o) {
				continue
			}
			r, ok := l.index[o.ReservationID]
			if !ok {
				continue
			}
			if idx == nil {
				idx = make([]int, min(len(it.Offerings), maxOfferings))
			}
			idx[k] = r
			reserved |= 1 << k
		}
	}
	p.reservedMask = append(p.reservedMask, reserved)
	p.reservationOf = append(p.reservationOf, idx)
	p.anyReserved = p.anyReserved || reserved != 0
}

// withoutFullReservations returns mask (offerings of p.types[i]) without
// the reserved offerings whose reservation has no free place and is not
// among held (sorted ledger indexes).
func (p *pool) withoutFullReservations(i int, mask uint64, held []int) uint64 {
	rm := mask & p.reservedMask[i]
	for rm != 0 {
		k := bits.TrailingZeros64(rm)
		rm &^= 1 << k
		r := p.reservationOf[i][k]
		if p.ledger.free[r] == 0 {
			if _, ok := slices.BinarySearch(held, r); !ok {
				mask &^= 1 << k
			}
		}
	}
	return mask
}

// reservationsOf returns the sorted ledger indexes of the reservations
// among the offerings the candidates c may launch into.
func (p *pool) reservationsOf(c candidates) []int {
	if !p.anyReserved {
		return nil
	}
	var out []int
	for k, i := range c.types {
		rm := c.masks[k] & p.reservedMask[i]
		for rm != 0 {
			o := bits.TrailingZeros64(rm)
			rm &^= 1 << o
			r := p.reservationOf[i][o]
			if j, ok := slices.BinarySearch(out, r); !ok {
				out = slices.Insert(out, j, r)
			}
		}
	}
	return out
}

// hold moves the plan's places from pl.held to now (sorted ledger
// indexes): places of reservations no longer in now are given back, one
// is taken in each new one (narrow kept only reservations with a free
// place or already held).
func (pl *plan) hold(now []int) {
	l := pl.pool.ledger
	if l == nil || (len(now) == 0 && len(pl.held) == 0) {
		pl.held = now
		return
	}
	for _, r := range pl.held {
		if _, ok := slices.BinarySearch(now, r); !ok {
			l.planned[r]--
			l.free[r]++
		}
	}
	for _, r := range now {
		if _, ok := slices.BinarySearch(pl.held, r); !ok {
			l.planned[r]++
			l.free[r]--
		}
	}
	pl.held = now
}

// heldIDs returns the reservation ids the plan holds, sorted.
func (pl *plan) heldIDs() []string {
	if len(pl.held) == 0 {
		return nil
	}
	out := make([]string, len(pl.held))
	for k, r := range pl.held {
		out[k] = pl.pool.ledger.ids[r]
	}
	sort.Strings(out)
	return out
}

// fullReservations returns the ledger indexes, sorted, of the reservations
// with no free place among the reserved offerings of the types whose
// offerings in masks are usable (termMasks: a pod term's).
func (p *pool) fullReservations(termMasks []uint64) []int {
	if !p.anyReserved {
		return nil
	}
	var out []int
	for i := range p.types {
		rm := p.offerings[i] & termMasks[i] & p.reservedMask[i]
		for rm != 0 {
			o := bits.TrailingZeros64(rm)
			rm &^= 1 << o
			r := p.reservationOf[i][o]
			if p.ledger.free[r] != 0 {
				continue
			}
			if j, ok := slices.BinarySearch(out, r); !ok {
				out = slices.Insert(out, j, r)
			}
		}
	}
	return out
}

// errReservationsFull says that every offering of NodePool p the pod may
// use is in a full capacity reservation, naming each with its counts and
// the fixes.
func (p *pool) errReservationsFull(full []int) error {
	l := p.ledger
	parts := make([]string, 0, len(full))
	for _, r := range full {
		parts = append(parts, l.describe(r))
	}
	return fmt.Errorf("NodePool %q may launch for the pod only into capacity reservations that are full: %s "+
		"(the pod stays pending until a place frees; to fall back, allow on-demand or spot in the NodePool's karpenter.sh/capacity-type requirement, or select a larger reservation)",
		p.name, strings.Join(parts, "; "))
}

// describe says who holds reservation r's places: "capacity reservation
// cr-… (m5.large in us-east-1a): 0 of 2 free places left, 1 held by
// NodeClaims not launched yet, 1 by NodeClaims planned with this pod".
func (l *reservationLedger) describe(r int) string {
	s := fmt.Sprintf("capacity reservation %s (%s): %d free place(s) left of the %d EC2 reports free", l.ids[r], l.where[r], l.free[r], l.offered[r])
	if l.inFlight[r] > 0 {
		s += fmt.Sprintf(", %d held by NodeClaims not launched yet", l.inFlight[r])
	}
	if l.planned[r] > 0 {
		s += fmt.Sprintf(", %d by other NodeClaims of this scheduling pass", l.planned[r])
	}
	return s
}

// fullUnavailableReservations returns the ids of reserved offerings among
// types that satisfy reqs but are not available, with their
// ReservationCapacity 0: reservations the cloud provider reported full.
func fullUnavailableReservations(types []*cloudprovider.InstanceType, reqs []requirement) []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range types {
		if it == nil {
			continue
		}
		var full uint64
		for k, o := range it.Offerings {
			if k < maxOfferings && isReservation(o) && !o.Available && o.ReservationCapacity <= 0 {
				full |= 1 << k
			}
		}
		if full == 0 {
			continue
		}
		m := allowedOfferings(it, reqs, full)
		for k, o := range it.Offerings {
			if k < maxOfferings && m&(1<<k) != 0 && !seen[o.ReservationID] {
				seen[o.ReservationID] = true
				out = append(out, fmt.Sprintf("%s (%s in %s)", o.ReservationID, it.Name, o.Zone))
			}
		}
	}
	sort.Strings(out)
	return out
}
