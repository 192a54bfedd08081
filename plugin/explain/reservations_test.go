package explain

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// reservedSnapshot is a pod of 1.5 vCPU, a NodePool "gpu" of m5.large in
// us-east-1a allowing the capacity types given, and its EC2NodeClass
// listing reservation cr-0a of m5.large there, of which the controller
// reports available of total places free.
func reservedSnapshot(available, total int, capacityTypes ...string) *Snapshot {
	class := ec2NodeClass("gpu", "us-east-1a")
	class.Status.CapacityReservations = []karpxv1.CapacityReservation{{ID: "cr-0a", AvailabilityZone: "us-east-1a", InstanceType: "m5.large",
		InstanceMatchCriteria: "targeted", OwnerID: "123456789012", ReservationType: "default", State: "active"}}
	np := nodePool("gpu", 0, "gpu", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"),
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, capacityTypes...))
	return &Snapshot{
		Pod:            pendingPod("1500m", "256Mi"),
		NodePools:      []karpv1.NodePool{*np},
		EC2NodeClasses: []karpxv1.EC2NodeClass{class},
		Reservations: &reservationreport.Report{Reservations: []reservationreport.Reservation{{ID: "cr-0a", InstanceType: "m5.large",
			Zone: "us-east-1a", Type: "default", Total: total, Available: available}}},
	}
}

// TestExplainReservationFull: a pod that only a full reservation can take
// is told which reservation, its counts and the fixes, in the NodePool's
// reason and the reservations' lines.
func TestExplainReservationFull(t *testing.T) {
	ex := Explain(reservedSnapshot(0, 2, "reserved"))
	r := result(t, ex, "gpu")
	if r.CanLaunch || !strings.Contains(r.Reason, "capacity reservations that are full or expiring: cr-0a (m5.large in us-east-1a)") {
		t.Errorf("gpu: %+v, want ruled out by the full reservation", r)
	}
	if len(ex.Reservations) != 1 || !ex.Reservations[0].Full || ex.Reservations[0].Total != 2 {
		t.Fatalf("reservations %+v, want cr-0a full of 2", ex.Reservations)
	}
	var out bytes.Buffer
	printReservations(&out, ex.Reservations)
	for _, want := range []string{"cr-0a (default, m5.large in us-east-1a, EC2NodeClass gpu, active): 0 of 2 free; FULL:", "allow on-demand or spot"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed %q, want %q", out.String(), want)
		}
	}
}

// TestExplainReservationFree: with a free place the pod gets the reserved
// offering (the cheapest); with the NodeClaim not launched yet that holds
// that place, it falls back to on-demand where the NodePool allows it.
func TestExplainReservationFree(t *testing.T) {
	s := reservedSnapshot(1, 2, "reserved", "on-demand")
	ex := Explain(s)
	if r := result(t, ex, "gpu"); !r.CanLaunch || r.CapacityType != "reserved" {
		t.Errorf("one free place: %+v, want reserved", r)
	}
	s.NodeClaims = []karpv1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "gpu-x",
		Labels:      map[string]string{karpv1.NodePoolLabelKey: "gpu"},
		Annotations: map[string]string{scheduling.ReservationsAnnotationKey: "cr-0a"}}}}
	ex = Explain(s)
	if r := result(t, ex, "gpu"); !r.CanLaunch || r.CapacityType != "on-demand" {
		t.Errorf("its place held by gpu-x: %+v, want on-demand", r)
	}
	if got := ex.Reservations[0]; !got.Full || len(got.Pending) != 1 {
		t.Errorf("reservation %+v, want full with gpu-x pending", got)
	}
	s.Reservations = nil
	ex = Explain(s)
	if !strings.Contains(strings.Join(ex.Notes, "\n"), ReservationsNote) {
		t.Errorf("no counts: notes %v, want %q", ex.Notes, ReservationsNote)
	}
}
