package capacityreservation

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/ec2sim"
)

// TestReportCountsPlaces: the report served at
// reservationreport.HandlerPath gives each described reservation EC2's
// TotalInstanceCount and the local count of free places (after a launch,
// after a full answer), and leaves out one whose end has passed.
func TestReportCountsPlaces(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := ec2apitest.Start(t, ec2sim.Config{Clock: clk, Throttle: ec2sim.ThrottleConfig{Disabled: true}}, ec2api.Config{RetryMaxAttempts: 1})
	odcr, err := env.Sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 3,
		InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	block, err := env.Sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b", TotalInstanceCount: 1,
		ReservationType: ec2sim.ReservationTypeCapacityBlock, EndDate: t0.Add(2 * time.Hour), Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	p := NewProvider(env.Client, cache.NoCaching(), clk)
	if got := p.Report(); len(got.Reservations) != 0 {
		t.Fatalf("report before any description: %+v", got)
	}
	if _, err := p.List(context.Background(), []v1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}); err != nil {
		t.Fatal(err)
	}
	p.MarkLaunched(odcr)
	p.MarkUnavailable(block)

	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + reservationreport.HandlerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep reservationreport.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	o, okO := rep.Find(odcr)
	b, okB := rep.Find(block)
	if !okO || !okB || len(rep.Reservations) != 2 {
		t.Fatalf("report %+v, want both reservations", rep)
	}
	if o.Total != 3 || o.Available != 2 || o.InstanceType != "m5.large" || o.Zone != "us-east-1a" || o.Type != TypeDefault || !o.Described.Equal(t0) {
		t.Errorf("ODCR %+v, want 2 of 3 free after one launch", o)
	}
	if b.Total != 1 || b.Available != 0 || b.Type != TypeCapacityBlock || !b.End.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("block %+v, want 0 of 1 free after a full answer", b)
	}
	clk.SetTime(t0.Add(2*time.Hour + time.Second))
	if got := p.Report(); len(got.Reservations) != 1 || got.Reservations[0].ID != odcr {
		t.Errorf("report past the block's end: %+v, want the ODCR only", got)
	}
	post, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", post.Status)
	}
}
