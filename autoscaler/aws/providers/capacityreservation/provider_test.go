package capacityreservation

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	testingclock "k8s.io/utils/clock/testing"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/ec2sim"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestInputAsKarpenter(t *testing.T) {
	in := Input(v1.CapacityReservationSelectorTerm{ID: "cr-0123456789abcdef0"})
	if len(in.CapacityReservationIds) != 1 || in.MaxResults != nil || len(in.Filters) != 1 || aws.ToString(in.Filters[0].Name) != "state" ||
		in.Filters[0].Values[0] != "active" {
		t.Errorf("id term: %+v", in)
	}
	in = Input(v1.CapacityReservationSelectorTerm{OwnerID: "210987654321", InstanceMatchCriteria: "targeted",
		Tags: map[string]string{"team": "ml", "any": "*"}})
	var names []string
	for _, f := range in.Filters {
		names = append(names, aws.ToString(f.Name)+"="+f.Values[0])
	}
	want := []string{"state=active", "owner-id=210987654321", "tag-key=any", "tag:team=ml", "instance-match-criteria=targeted"}
	if aws.ToInt32(in.MaxResults) != 1000 || len(in.CapacityReservationIds) != 0 || len(names) != len(want) {
		t.Fatalf("tags term: %v, MaxResults %v", names, in.MaxResults)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("filter %d: %s, want %s", i, names[i], want[i])
		}
	}
	if Input(v1.CapacityReservationSelectorTerm{}) != nil {
		t.Error("an empty term must select nothing")
	}
}

func TestListResolvesTermsAgainstEC2(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := ec2apitest.Start(t, ec2sim.Config{Clock: clk, Throttle: ec2sim.ThrottleConfig{Disabled: true}}, ec2api.Config{RetryMaxAttempts: 1})
	add := func(cr ec2sim.CapacityReservation) string {
		t.Helper()
		id, err := env.Sim.AddCapacityReservation(cr)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	odcr := add(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2,
		InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, Tags: map[string]string{"team": "ml"}})
	block := add(ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b", TotalInstanceCount: 1,
		ReservationType: ec2sim.ReservationTypeCapacityBlock, EndDate: t0.Add(2 * time.Hour), Tags: map[string]string{"team": "ml"}})
	other := add(ec2sim.CapacityReservation{InstanceType: "c5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1,
		Tags: map[string]string{"team": "web"}})

	p := NewProvider(env.Client, cache.NoCaching(), clk)
	ctx := context.Background()
	terms := []v1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}, {ID: other}, {ID: "cr-0000000000000000f"}}
	rs, err := p.List(ctx, terms)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].ID > rs[1].ID || rs[1].ID > rs[2].ID {
		t.Fatalf("want the three known reservations sorted by id (the unknown id selects nothing), got %+v", rs)
	}
	byID := map[string]Reservation{}
	for _, r := range rs {
		byID[r.ID] = r
	}
	if r := byID[odcr]; r.InstanceType != "m5.large" || r.Zone != "us-east-1a" || r.Type != TypeDefault || r.InstanceMatchCriteria != "targeted" ||
		r.Available != 2 || !r.End.IsZero() || r.OwnerID == "" {
		t.Errorf("ODCR %+v", r)
	}
	if p.Available(odcr) != 2 || p.Available(block) != 1 {
		t.Errorf("available after describe: %d %d", p.Available(odcr), p.Available(block))
	}
	p.MarkLaunched(odcr)
	p.MarkUnavailable(block)
	if p.Available(odcr) != 1 || p.Available(block) != 0 {
		t.Errorf("available after a launch and a full answer: %d %d", p.Available(odcr), p.Available(block))
	}

	st := Status(rs, clk.Now())
	if len(st) != 3 || st[0].ID != rs[0].ID {
		t.Fatalf("status %+v", st)
	}
	for _, s := range st {
		if s.State != StateActive {
			t.Errorf("%s: state %s at t0, want active", s.ID, s.State)
		}
		if s.ID == block && (s.EndTime == nil || !s.EndTime.Time.Equal(t0.Add(2*time.Hour)) || s.ReservationType != TypeCapacityBlock) {
			t.Errorf("block status %+v", s)
		}
	}
	// 40 minutes before its end a Capacity Block is expiring; an ODCR never is.
	clk.SetTime(t0.Add(2*time.Hour - ExpiringWindow))
	for _, s := range Status(rs, clk.Now()) {
		if want := map[bool]string{true: StateExpiring, false: StateActive}[s.ID == block]; s.State != want {
			t.Errorf("%s at end-40m: %s, want %s", s.ID, s.State, want)
		}
	}
	// Past its end it is gone: EC2 no longer lists it as active, and List
	// drops a cached one whose end has passed.
	clk.SetTime(t0.Add(3 * time.Hour))
	rs, err = p.List(ctx, terms)
	if err != nil || len(rs) != 2 {
		t.Fatalf("after the block's end: %v %+v", err, rs)
	}
	cached := NewProvider(env.Client, cache.DefaultTTLs(), clk)
	clk.SetTime(t0)
	if rs, _ := cached.List(ctx, terms); len(rs) != 3 {
		t.Fatalf("cached provider at t0: %+v", rs)
	}
	clk.SetTime(t0.Add(2*time.Hour + time.Second))
	if rs, _ := cached.List(ctx, terms); len(rs) != 2 {
		t.Fatalf("cached provider past the block's end: %+v", rs)
	}
}
