package cloudprovider

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/ec2sim"
)

// newReservedSimEnv is newSimEnv with the ReservedCapacity gate on and
// reservations added to the simulator; it resolves the default class's
// status as the status controller would before returning.
func newReservedSimEnv(t *testing.T, terms []v1.CapacityReservationSelectorTerm, add func(*ec2sim.Simulator)) (*simEnv, client.Client) {
	t.Helper()
	env := ec2apitest.Start(t, ec2sim.Config{ClusterName: cluster, Throttle: ec2sim.ThrottleConfig{Disabled: true}, ShuttingDownDelay: 300 * time.Millisecond},
		ec2api.Config{RetryMaxAttempts: 8})
	add(env.Sim)
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	class := defaultNodeClass()
	class.Spec.CapacityReservationSelectorTerms = terms
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class).Build()
	cp, err := New(Options{ClusterName: cluster, ClusterEndpoint: "https://api.demo.example", ClusterCABundle: "Q0E=",
		Region: "us-east-1", KubeClient: kube, EC2API: env.Client, ReservedCapacity: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &simEnv{endpoint: env.Endpoint, sim: env.Sim, api: env.Client, cp: cp}
	e.resolveReservations(t, kube)
	return e, kube
}

// resolveReservations writes the default class's resolved capacity
// reservations, subnets and security groups into its status, as the nodeclass status controller does every minute.
func (e *simEnv) resolveReservations(t *testing.T, kube client.Client) {
	t.Helper()
	ctx := context.Background()
	class := &v1.EC2NodeClass{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	st, err := e.cp.ResolveNodeClass(ctx, class)
	if err != nil {
		t.Fatal(err)
	}
	class.Status.CapacityReservations, class.Status.Subnets, class.Status.SecurityGroups = st.CapacityReservations, st.Subnets, st.SecurityGroups
	if err := kube.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
}

// TestSimReservedCapacityFillsThenFallsBack: a NodeClaim that allows
// reserved and on-demand launches into the reservation while it has room
// (labels karpenter.sh/capacity-type=reserved and the reservation's id and
// type), then, once the local count says it is full, launches on-demand
// outside it without trying the reservation: one CreateFleet per NodeClaim.
func TestSimReservedCapacityFillsThenFallsBack(t *testing.T) {
	var cr string
	e, kube := newReservedSimEnv(t, []v1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}, func(sim *ec2sim.Simulator) {
		var err error
		cr, err = sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
			TotalInstanceCount: 2, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, Tags: map[string]string{"team": "ml"}})
		if err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	its, err := e.cp.GetInstanceTypes(ctx, nodePool("default"))
	if err != nil {
		t.Fatal(err)
	}
	var od, reserved *cloudprovider.Offering
	for i, o := range find(its, "m5.large").Offerings {
		switch {
		case o.CapacityType == cloudprovider.CapacityTypeReserved:
			reserved = &find(its, "m5.large").Offerings[i]
		case o.CapacityType == cloudprovider.CapacityTypeOnDemand && o.Zone == "us-east-1a":
			od = &find(its, "m5.large").Offerings[i]
		}
	}
	if reserved == nil || od == nil || reserved.ReservationID != cr || reserved.Zone != "us-east-1a" || !reserved.Available ||
		reserved.PriceUSDPerHour != od.PriceUSDPerHour/ReservedPriceDivisor || reserved.ReservationType != "default" {
		t.Fatalf("reserved offering %+v, on-demand %+v", reserved, od)
	}
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{in(corev1.LabelInstanceTypeStable, "m5.large"),
		in(karpv1.CapacityTypeLabelKey, "reserved", "on-demand")}
	var first *karpv1.NodeClaim
	for i := range 2 {
		got, err := e.cp.Create(ctx, nodeClaim("r-"+string(rune('a'+i)), reqs...))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = got
		}
		if got.Labels[karpv1.CapacityTypeLabelKey] != "reserved" || got.Labels[LabelCapacityReservationID] != cr ||
			got.Labels[LabelCapacityReservationType] != "default" || got.Labels[corev1.LabelTopologyZone] != "us-east-1a" {
			t.Fatalf("reserved NodeClaim %d labels %v", i, got.Labels)
		}
	}
	for _, in := range e.sim.Instances() {
		if in.CapacityReservationID != cr {
			t.Fatalf("instance %s outside the reservation", in.ID)
		}
	}
	got, err := e.cp.Create(ctx, nodeClaim("od", reqs...))
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[karpv1.CapacityTypeLabelKey] != "on-demand" || got.Labels[LabelCapacityReservationID] != "" {
		t.Fatalf("third NodeClaim labels %v", got.Labels)
	}
	if n := e.sim.Stats()["CreateFleet"].Requests; n != 3 {
		t.Errorf("CreateFleet calls: %d, want 3 (one per NodeClaim)", n)
	}
	if st := e.sim.CapacityReservations()[0]; st.AvailableInstanceCount != 0 || len(st.Instances) != 2 {
		t.Errorf("reservation %+v", st)
	}

	// Drift: none while the reservation is in the status; once it left
	// (here: cancelled, so no longer active), CapacityReservationDrift.
	if reason, err := e.cp.IsDrifted(ctx, first); err != nil || reason != "" {
		t.Fatalf("IsDrifted with the reservation in the status: %q %v", reason, err)
	}
	if err := e.sim.CancelCapacityReservation(cr); err != nil {
		t.Fatal(err)
	}
	// The status controller would see it within the selector cache's TTL
	// (a minute); the test skips the wait with an uncached provider.
	e.cp.reservations = capacityreservation.NewProvider(e.api, cache.NoCaching(), e.cp.opts.Clock)
	e.resolveReservations(t, kube)
	if reason, err := e.cp.IsDrifted(ctx, first); err != nil || reason != DriftReasonCapacityReservation {
		t.Fatalf("IsDrifted after the reservation was cancelled: %q %v", reason, err)
	}
}

// TestSimReservationFullAtEC2: when EC2 finds the reservation full although
// the last description had room (another launcher took the place), the
// launch fails with an InsufficientCapacityError, the reservation and its
// reserved offering are marked unavailable, and the retry launches
// on-demand: two CreateFleet calls in all, never a loop on the full
// reservation (the P1 guarantee).
func TestSimReservationFullAtEC2(t *testing.T) {
	var cr string
	e, _ := newReservedSimEnv(t, nil, func(*ec2sim.Simulator) {})
	var err error
	cr, err = e.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1b", TotalInstanceCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	class := &v1.EC2NodeClass{}
	kube := e.cp.opts.KubeClient.(client.Client)
	if err := kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	class.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{ID: cr}}
	if err := kube.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	e.resolveReservations(t, kube)
	// karpx's own on-demand launches opt out of open reservations with
	// the gate on (preference none, as Karpenter's): this one leaves the
	// open ODCR alone.
	if _, err := e.cp.Create(ctx, nodeClaim("other", in(corev1.LabelInstanceTypeStable, "m5.large"), in(corev1.LabelTopologyZone, "us-east-1b"),
		in(karpv1.CapacityTypeLabelKey, "on-demand"))); err != nil {
		t.Fatal(err)
	}
	if st := e.sim.CapacityReservations()[0]; st.AvailableInstanceCount != 1 {
		t.Fatalf("karpx's on-demand launch went into the open reservation: %+v", st)
	}
	// Someone else takes the only place.
	fillOpenReservation(t, e, "us-east-1b")
	fleets := e.sim.Stats()["CreateFleet"].Requests
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{in(corev1.LabelInstanceTypeStable, "m5.large"), in(corev1.LabelTopologyZone, "us-east-1b"),
		in(karpv1.CapacityTypeLabelKey, "reserved", "on-demand")}
	_, err = e.cp.Create(ctx, nodeClaim("r-1", reqs...))
	var ice *cloudprovider.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("launch into a reservation full at EC2: %v, want InsufficientCapacityError", err)
	}
	if e.cp.reservations.Available(cr) != 0 || !e.cp.UnavailableOfferings().IsUnavailable("m5.large", "us-east-1b", cloudprovider.CapacityTypeReserved) {
		t.Fatal("the full reservation was not marked unavailable")
	}
	got, err := e.cp.Create(ctx, nodeClaim("r-1", reqs...))
	if err != nil || got.Labels[karpv1.CapacityTypeLabelKey] != "on-demand" {
		t.Fatalf("retry: %v %v", err, got)
	}
	if n := e.sim.Stats()["CreateFleet"].Requests - fleets; n != 2 {
		t.Errorf("CreateFleet calls for the NodeClaim: %d, want 2", n)
	}
}

// fillOpenReservation launches one on-demand m5.large in zone through a
// plain launch template (preference open), which EC2 puts into the open
// reservation there.
func fillOpenReservation(t *testing.T, e *simEnv, zone string) {
	t.Helper()
	before := e.sim.CapacityReservations()[0].AvailableInstanceCount
	ctx := context.Background()
	cp, err := New(Options{ClusterName: cluster, ClusterEndpoint: "https://api.demo.example", ClusterCABundle: "Q0E=",
		Region: "us-east-1", KubeClient: e.cp.opts.KubeClient, EC2API: e.api})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Create(ctx, nodeClaim("outside", in(corev1.LabelInstanceTypeStable, "m5.large"), in(corev1.LabelTopologyZone, zone),
		in(karpv1.CapacityTypeLabelKey, "on-demand"))); err != nil {
		t.Fatal(err)
	}
	if after := e.sim.CapacityReservations()[0].AvailableInstanceCount; after != before-1 {
		t.Fatalf("the outside launch did not fill the open reservation: %d → %d", before, after)
	}
}

// TestReservationDrift: a reserved instance drifts once its reservation
// left the class's status; other instances never do on this check.
func TestReservationDrift(t *testing.T) {
	class := defaultNodeClass()
	class.Status.CapacityReservations = []v1.CapacityReservation{{ID: "cr-0123456789abcdef0"}}
	for _, tc := range []struct {
		id, want string
	}{
		{"", ""},
		{"cr-0123456789abcdef0", ""},
		{"cr-0fedcba9876543210", DriftReasonCapacityReservation},
	} {
		if got := reservationDrift(&instance.Instance{ReservationID: tc.id}, class); got != tc.want {
			t.Errorf("instance in %q: %q, want %q", tc.id, got, tc.want)
		}
	}
}
