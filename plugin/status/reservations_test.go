package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/plugin/table"
)

// TestReservationTable: one row per reservation of each EC2NodeClass's
// status, with the controller's free/total places when it reported
// them (FULL at 0) and ? otherwise, and the end with the time left.
func TestReservationTable(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	end := metav1.NewTime(now.Add(90 * time.Minute))
	gpu := karpxv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	gpu.Status.CapacityReservations = []karpxv1.CapacityReservation{
		{ID: "cr-0a", AvailabilityZone: "us-east-1a", InstanceType: "p5.48xlarge", ReservationType: "capacity-block", EndTime: &end, State: "active"},
		{ID: "cr-0b", AvailabilityZone: "us-east-1b", InstanceType: "m5.large"},
	}
	web := karpxv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	rep := &reservationreport.Report{Reservations: []reservationreport.Reservation{{ID: "cr-0a", Total: 4, Available: 0}}}
	var out bytes.Buffer
	if err := (table.Printer{}).Print(&out, reservationTable([]karpxv1.EC2NodeClass{web, gpu}, rep, now)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s\nwant a header and 2 rows", out.String())
	}
	for i, want := range [][]string{
		{"EC2NODECLASS", "ID", "TYPE", "INSTANCE-TYPE", "ZONE", "AVAILABLE", "END", "STATE"},
		{"gpu", "cr-0a", "capacity-block", "p5.48xlarge", "us-east-1a", "0/4", "2026-03-01T13:30:00Z (in 1h30m0s)", "active, FULL"},
		{"gpu", "cr-0b", "default", "m5.large", "us-east-1b", "?", "-", "active"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
}
