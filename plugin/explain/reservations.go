package explain

import (
	"fmt"
	"io"
	"slices"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// ReservationResult is one capacity reservation of an EC2NodeClass a
// NodePool of the explanation uses.
type ReservationResult struct {
	// ID, Type ("default" or "capacity-block"), InstanceType, Zone and
	// State ("active", "expiring") are from the EC2NodeClass's
	// status.capacityReservations.
	ID           string `json:"id"`
	EC2NodeClass string `json:"ec2NodeClass"`
	Type         string `json:"type"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	State        string `json:"state"`
	// Total and Available are the controller's counts (EC2's
	// TotalInstanceCount; AvailableInstanceCount less its launches since);
	// Known is false when the controller did not answer.
	Total     int  `json:"total"`
	Available int  `json:"available"`
	Known     bool `json:"known"`
	// Pending are the NodeClaims not launched yet that hold a place in it
	// (scheduling.ReservationsAnnotationKey).
	Pending []string `json:"pending,omitempty"`
	// Free is what a new NodeClaim may still take: Available less Pending
	// (0 when expiring). Full is Free == 0.
	Free int  `json:"free"`
	Full bool `json:"full"`
}

// ReservationsNote is the note of an explanation whose EC2NodeClasses list
// capacity reservations the controller gave no counts for.
const ReservationsNote = "the karpx controller's capacity reservation counts are unavailable: reservations are assumed to have a free place"

// reservations returns a ReservationResult per entry of the
// status.capacityReservations of class, with s.Reservations' counts.
func (s *Snapshot) reservations(class *karpxv1.EC2NodeClass) []ReservationResult {
	var out []ReservationResult
	for _, cr := range class.Status.CapacityReservations {
		r := ReservationResult{ID: cr.ID, EC2NodeClass: class.Name, Type: cr.ReservationType, InstanceType: cr.InstanceType, Zone: cr.AvailabilityZone, State: cr.State}
		if r.Type == "" {
			r.Type = "default"
		}
		if r.State == "" {
			r.State = "active"
		}
		for i := range s.NodeClaims {
			nc := &s.NodeClaims[i]
			if nc.Status.ProviderID == "" && nc.DeletionTimestamp.IsZero() &&
				slices.Contains(strings.Split(nc.Annotations[scheduling.ReservationsAnnotationKey], ","), cr.ID) {
				r.Pending = append(r.Pending, nc.Name)
			}
		}
		if c, ok := s.Reservations.Find(cr.ID); ok {
			r.Total, r.Available, r.Known = c.Total, c.Available, true
			r.Free = max(c.Available-len(r.Pending), 0)
		} else {
			r.Free = 1
		}
		if r.State == "expiring" {
			r.Free = 0
		}
		r.Full = r.Free == 0
		out = append(out, r)
	}
	return out
}

// usedReservations returns the reservations of the EC2NodeClasses the
// NodePools reference, by EC2NodeClass then status order.
func (s *Snapshot) usedReservations() []ReservationResult {
	var out []ReservationResult
	for i := range s.EC2NodeClasses {
		c := &s.EC2NodeClasses[i]
		if slices.ContainsFunc(s.NodePools, func(np karpv1.NodePool) bool {
			ref := np.Spec.Template.Spec.NodeClassRef
			return modelled(&np) && ref != nil && ref.Name == c.Name
		}) {
			out = append(out, s.reservations(c)...)
		}
	}
	return out
}

// withReservations returns types with a reserved offering per reservation
// of rs of their type, as the AWS cloud provider adds them: priced at the
// on-demand price over reservationreport.ReservedPriceDivisor, available
// while it has a free place (Free), with Free as ReservationCapacity.
// The in-flight NodeClaims are already out of Free, so Solve is not told
// them again.
func withReservations(types []*cloudprovider.InstanceType, rs []ReservationResult) []*cloudprovider.InstanceType {
	if len(rs) == 0 {
		return types
	}
	for k, it := range types {
		var extra []cloudprovider.Offering
		for _, r := range rs {
			if r.InstanceType != it.Name {
				continue
			}
			od, ok := it.CheapestOffering(func(o cloudprovider.Offering) bool { return o.CapacityType == karpv1.CapacityTypeOnDemand })
			if !ok {
				continue
			}
			extra = append(extra, cloudprovider.Offering{Zone: r.Zone, CapacityType: karpv1.CapacityTypeReserved,
				PriceUSDPerHour: od.PriceUSDPerHour / reservationreport.ReservedPriceDivisor, Available: r.Free > 0,
				ReservationID: r.ID, ReservationType: r.Type, ReservationCapacity: r.Free})
		}
		if len(extra) > 0 {
			cp := *it
			cp.Offerings = append(slices.Clone(it.Offerings), extra...)
			types[k] = &cp
		}
	}
	return types
}

// printReservations writes the "Capacity reservations" lines: one per
// reservation the NodePools' EC2NodeClasses list, with its counts and,
// when full, what the user can do.
func printReservations(w io.Writer, rs []ReservationResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nCapacity reservations of the NodePools' EC2NodeClasses (status.capacityReservations; free/total places from the karpx controller):\n")
	for _, r := range rs {
		counts := "free places unknown"
		if r.Known {
			counts = fmt.Sprintf("%d of %d free", r.Available, r.Total)
		}
		line := fmt.Sprintf("  %s (%s, %s in %s, EC2NodeClass %s, %s): %s", r.ID, r.Type, r.InstanceType, r.Zone, r.EC2NodeClass, r.State, counts)
		if len(r.Pending) > 0 {
			line += fmt.Sprintf(", %d held by NodeClaims not launched yet (%s)", len(r.Pending), strings.Join(r.Pending, ", "))
		}
		switch {
		case r.State == "expiring":
			line += "; EXPIRING: no new node launches into it (its Capacity Block ends within 40 minutes)"
		case r.Full:
			line += "; FULL: a pod that only it can take stays pending until a place frees (a node in it is deleted or the reservation grows); " +
				"allow on-demand or spot in the NodePool's karpenter.sh/capacity-type requirement to fall back, or select another reservation in the EC2NodeClass's capacityReservationSelectorTerms"
		}
		fmt.Fprintln(w, line)
	}
}
