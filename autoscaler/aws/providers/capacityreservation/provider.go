package capacityreservation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
)

// Reservation types (EC2 API Reference, CapacityReservation.ReservationType;
// Karpenter's v1.CapacityReservationType@v1.14.0).
const (
	TypeDefault       = "default"
	TypeCapacityBlock = "capacity-block"
)

// Reservation states of status.capacityReservations (Karpenter's
// v1.CapacityReservationState@v1.14.0).
const (
	StateActive   = "active"
	StateExpiring = "expiring"
)

// ExpiringWindow is how long before its end a Capacity Block is
// "expiring": 40 minutes, when EC2 sends the Capacity Block Reservation
// Expiration Warning (EC2 User Guide, "Monitor Capacity Blocks using
// EventBridge"), 10 minutes before it starts terminating the block's
// instances; Karpenter's CapacityReservationFromEC2@v1.14.0 uses the same
// window.
const ExpiringWindow = 40 * time.Minute

// maxResults is the page size asked of DescribeCapacityReservations (its
// maximum, 1000; EC2 API Reference).
const maxResults = 1000

// Reservation is one resolved capacity reservation.
type Reservation struct {
	// ID is the reservation id, "cr-" and 17 hex digits.
	ID string
	// InstanceType is the reserved instance type, for example "p5.48xlarge".
	InstanceType string
	// Zone is the reservation's availability zone, for example "us-east-1a".
	Zone string
	// OwnerID is the 12-digit owning account.
	OwnerID string
	// InstanceMatchCriteria is "open" or "targeted".
	InstanceMatchCriteria string
	// Type is TypeDefault or TypeCapacityBlock.
	Type string
	// End is when it expires; zero for none.
	End time.Time
	// Interruptible is EC2's Interruptible flag.
	Interruptible bool
	// Available is AvailableInstanceCount when it was described.
	Available int
	// Total is TotalInstanceCount when it was described.
	Total int
}

// Provider resolves capacity reservation selector terms and tracks the
// free places of each reservation it resolved. Safe for concurrent use.
type Provider struct {
	api   ec2api.API
	clk   clock.PassiveClock
	terms *cache.TermResolver[v1.CapacityReservationSelectorTerm, Reservation]

	mu sync.Mutex
	// available is each reservation's free places: the count of its last
	// description, less the launches since (MarkLaunched), or 0 once a
	// launch found it full (MarkUnavailable) until it is described again.
	available map[string]int
	// described is each reservation as last described, and when.
	described map[string]described
}

// described is a reservation as last described, and when.
type described struct {
	r  Reservation
	at time.Time
}

// NewProvider returns a Provider describing through api, each set of terms
// cached for ttls.Default, expiry judged by clk.
func NewProvider(api ec2api.API, ttls cache.TTLs, clk clock.PassiveClock) *Provider {
	return &Provider{api: api, clk: clk, available: map[string]int{}, described: map[string]described{},
		terms: cache.NewTermResolver[v1.CapacityReservationSelectorTerm](ttls.Default, func(r Reservation) string { return r.ID },
			func(a, b Reservation) bool { return a.ID < b.ID })}
}

// Input returns the DescribeCapacityReservations request of one term, as
// Karpenter's Query.DescribeCapacityReservationsInput@v1.14.0 builds it:
// state=active always; an id term names the reservation (without
// MaxResults, which EC2 refuses with ids); any other term filters by
// owner-id, tags and instance-match-criteria with MaxResults 1000. It
// returns nil for an empty term, which selects nothing.
func Input(term v1.CapacityReservationSelectorTerm) *ec2.DescribeCapacityReservationsInput {
	filters := []ec2types.Filter{ec2api.Filter("state", string(ec2types.CapacityReservationStateActive))}
	if term.ID != "" {
		return &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{term.ID}, Filters: filters}
	}
	if len(term.Tags) == 0 && term.InstanceMatchCriteria == "" && term.OwnerID == "" {
		return nil
	}
	if term.OwnerID != "" {
		filters = append(filters, ec2api.Filter("owner-id", term.OwnerID))
	}
	filters = append(filters, ec2api.TagFilters(term.Tags)...)
	if term.InstanceMatchCriteria != "" {
		filters = append(filters, ec2api.Filter("instance-match-criteria", term.InstanceMatchCriteria))
	}
	return &ec2.DescribeCapacityReservationsInput{Filters: filters, MaxResults: aws.Int32(maxResults)}
}

// List returns the reservations matching any term, sorted by id, without
// those whose end has passed. An empty result is not an error. Errors are
// the first failed page's, wrapped as "describing capacity reservations:
// ...". A described reservation's AvailableInstanceCount replaces the
// local count of its free places.
func (p *Provider) List(ctx context.Context, terms []v1.CapacityReservationSelectorTerm) ([]Reservation, error) {
	all, err := p.terms.Resolve(terms, func(term v1.CapacityReservationSelectorTerm) ([]Reservation, error) {
		in := Input(term)
		if in == nil {
			return nil, nil
		}
		var found []Reservation
		pages := ec2.NewDescribeCapacityReservationsPaginator(p.api, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if isNotFound(err) {
				// Only an id term gets this, in one page.
				break
			}
			if err != nil {
				return nil, fmt.Errorf("describing capacity reservations: %w", err)
			}
			for _, cr := range page.CapacityReservations {
				found = append(found, fromEC2(cr))
			}
		}
		p.sync(found)
		return found, nil
	})
	if err != nil {
		return nil, err
	}
	now := p.clk.Now()
	out := make([]Reservation, 0, len(all))
	for _, r := range all {
		if r.End.IsZero() || r.End.After(now) {
			out = append(out, r)
		}
	}
	return out, nil
}

func isNotFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidCapacityReservationId.NotFound"
}

func fromEC2(cr ec2types.CapacityReservation) Reservation {
	r := Reservation{ID: aws.ToString(cr.CapacityReservationId), InstanceType: aws.ToString(cr.InstanceType),
		Zone: aws.ToString(cr.AvailabilityZone), OwnerID: aws.ToString(cr.OwnerId), InstanceMatchCriteria: string(cr.InstanceMatchCriteria),
		Type: string(cr.ReservationType), Interruptible: aws.ToBool(cr.Interruptible), Available: int(aws.ToInt32(cr.AvailableInstanceCount)),
		Total: int(aws.ToInt32(cr.TotalInstanceCount))}
	if r.Type == "" {
		r.Type = TypeDefault
	}
	if cr.EndDate != nil {
		r.End = *cr.EndDate
	}
	return r
}

func (p *Provider) sync(rs []Reservation) {
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rs {
		p.available[r.ID] = r.Available
		p.described[r.ID] = described{r: r, at: now}
	}
}

// Report returns every reservation described so far whose end has not
// passed, with its free places as Available counts them, sorted by id.
func (p *Provider) Report() reservationreport.Report {
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := reservationreport.Report{Reservations: []reservationreport.Reservation{}}
	for id, d := range p.described {
		if !d.r.End.IsZero() && !d.r.End.After(now) {
			continue
		}
		out.Reservations = append(out.Reservations, reservationreport.Reservation{ID: id, InstanceType: d.r.InstanceType, Zone: d.r.Zone,
			Type: d.r.Type, Total: d.r.Total, Available: p.available[id], Described: d.at, End: d.r.End})
	}
	sort.Slice(out.Reservations, func(i, j int) bool { return out.Reservations[i].ID < out.Reservations[j].ID })
	return out
}

// Handler serves Report as JSON (GET only), for the operator to mount at
// reservationreport.HandlerPath.
func (p *Provider) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Report())
	})
}

// Available returns the free places of reservation id as last known: 0
// for one never described.
func (p *Provider) Available(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.available[id]
}

// MarkLaunched counts one launch into reservation id until its next
// description.
func (p *Provider) MarkLaunched(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.available[id] > 0 {
		p.available[id]--
	}
}

// MarkUnavailable records that launches found the reservations ids full
// (CreateFleet's ReservationCapacityExceeded), until their next
// description.
func (p *Provider) MarkUnavailable(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		p.available[id] = 0
	}
}

// Expiring reports whether a reservation of type reservationType that
// ends at end (zero for no end) is expiring at now: a Capacity Block
// within ExpiringWindow (40 minutes) of its end, as Karpenter's
// CapacityReservationFromEC2@v1.14.3 judges it. An ODCR never is: its
// instances run on as on-demand when it ends.
func Expiring(reservationType string, end, now time.Time) bool {
	return reservationType == TypeCapacityBlock && !end.IsZero() && !now.Before(end.Add(-ExpiringWindow))
}

// Status renders reservations as status.capacityReservations at now,
// sorted by id: a Capacity Block within ExpiringWindow of its end is
// "expiring", every other reservation "active" (Karpenter's
// CapacityReservationFromEC2@v1.14.0). Reservations of an instance match
// criteria or type Karpenter does not know are left out.
func Status(rs []Reservation, now time.Time) []v1.CapacityReservation {
	out := make([]v1.CapacityReservation, 0, len(rs))
	for _, r := range rs {
		if (r.InstanceMatchCriteria != "open" && r.InstanceMatchCriteria != "targeted") || (r.Type != TypeDefault && r.Type != TypeCapacityBlock) {
			continue
		}
		st := v1.CapacityReservation{AvailabilityZone: r.Zone, ID: r.ID, InstanceMatchCriteria: r.InstanceMatchCriteria,
			InstanceType: r.InstanceType, Interruptible: r.Interruptible, OwnerID: r.OwnerID, ReservationType: r.Type, State: StateActive}
		if !r.End.IsZero() {
			end := metav1.NewTime(r.End)
			st.EndTime = &end
			if Expiring(r.Type, r.End, now) {
				st.State = StateExpiring
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
