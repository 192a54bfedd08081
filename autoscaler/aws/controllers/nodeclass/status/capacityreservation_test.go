package status

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/karpx/karpx/apis/v1"
	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/ec2sim"
)

// newReservedEnv is newTestEnv with the ReservedCapacity gate set to
// reserved and the simulator and cloud provider on clk.
func newReservedEnv(t *testing.T, clk *testingclock.FakeClock, reserved bool, classes ...*v1.EC2NodeClass) *testEnv {
	t.Helper()
	env := ec2apitest.Start(t, ec2sim.Config{ClusterName: cluster, Clock: clk, Throttle: ec2sim.ThrottleConfig{Disabled: true}},
		ec2api.Config{RetryMaxAttempts: 1})
	if _, err := env.Client.CreateInstanceProfile(context.Background(), &iam.CreateInstanceProfileInput{InstanceProfileName: awssdk.String("KarpxNodeProfile")}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.EC2NodeClass{})
	for _, c := range classes {
		b = b.WithObjects(c)
	}
	kube := b.Build()
	cp, err := awscloud.New(awscloud.Options{ClusterName: cluster, ClusterEndpoint: "https://api.demo.example", ClusterCABundle: "Q0E=",
		Region: "us-east-1", KubeClient: kube, EC2API: env.Client, Clock: clk, ReservedCapacity: reserved})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	return &testEnv{kube: kube, sim: env.Sim, recorder: rec, ctrl: New(kube, cp, rec, Options{})}
}

// TestCapacityReservationsStatus: with the ReservedCapacity gate on, the
// selector terms resolve into status.capacityReservations and
// CapacityReservationsReady is True (reason CapacityReservationsReady, as
// Karpenter's SetTrue writes it), also when nothing matches; with the gate
// off neither is written, as in Karpenter.
func TestCapacityReservationsStatus(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	withTerms := func(c *v1.EC2NodeClass) {
		c.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}
	}
	clk := testingclock.NewFakeClock(t0)
	e := newReservedEnv(t, clk, true, class("reserved", withTerms), class("unmatched", func(c *v1.EC2NodeClass) {
		c.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{ID: "cr-0000000000000000f"}}
	}))
	odcr, err := e.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	block, err := e.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b",
		TotalInstanceCount: 1, ReservationType: ec2sim.ReservationTypeCapacityBlock, EndDate: t0.Add(time.Hour), Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}

	_, got := e.reconcile(t, "reserved")
	if c := cond(t, got, v1.ConditionTypeCapacityReservationsReady); c.Status != metav1.ConditionTrue || c.Reason != v1.ConditionTypeCapacityReservationsReady {
		t.Errorf("CapacityReservationsReady = %+v", c)
	}
	if c := cond(t, got, v1.ConditionTypeReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v", c)
	}
	crs := got.Status.CapacityReservations
	if len(crs) != 2 {
		t.Fatalf("status.capacityReservations = %+v", crs)
	}
	want := map[string]v1.CapacityReservation{
		odcr:  {ID: odcr, InstanceType: "m5.large", AvailabilityZone: "us-east-1a", InstanceMatchCriteria: "targeted", ReservationType: "default", State: "active"},
		block: {ID: block, InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b", InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", State: "active"},
	}
	for _, cr := range crs {
		w := want[cr.ID]
		if cr.InstanceType != w.InstanceType || cr.AvailabilityZone != w.AvailabilityZone || cr.InstanceMatchCriteria != w.InstanceMatchCriteria ||
			cr.ReservationType != w.ReservationType || cr.State != w.State || len(cr.OwnerID) != 12 {
			t.Errorf("%s: %+v, want %+v", cr.ID, cr, w)
		}
	}

	// Forty minutes before its end the block is expiring; past its end it
	// is no longer listed.
	clk.SetTime(t0.Add(time.Hour - capacityreservation.ExpiringWindow))
	_, got = e.reconcile(t, "reserved")
	for _, cr := range got.Status.CapacityReservations {
		if cr.ID == block && cr.State != capacityreservation.StateExpiring {
			t.Errorf("block at end-40m: %s, want expiring", cr.State)
		}
	}
	clk.SetTime(t0.Add(time.Hour + time.Minute))
	_, got = e.reconcile(t, "reserved")
	if crs := got.Status.CapacityReservations; len(crs) != 1 || crs[0].ID != odcr {
		t.Errorf("after the block's end: %+v", crs)
	}

	_, got = e.reconcile(t, "unmatched")
	if c := cond(t, got, v1.ConditionTypeCapacityReservationsReady); c.Status != metav1.ConditionTrue || len(got.Status.CapacityReservations) != 0 {
		t.Errorf("unmatched: condition %+v, reservations %+v", c, got.Status.CapacityReservations)
	}

	off := newReservedEnv(t, testingclock.NewFakeClock(t0), false, class("reserved", withTerms))
	if _, err := off.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 1, Tags: map[string]string{"team": "ml"}}); err != nil {
		t.Fatal(err)
	}
	_, got = off.reconcile(t, "reserved")
	if meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeCapacityReservationsReady) != nil || len(got.Status.CapacityReservations) != 0 {
		t.Errorf("gate off: conditions %+v, reservations %+v", got.Status.Conditions, got.Status.CapacityReservations)
	}
	if off.sim.Stats()["DescribeCapacityReservations"].Requests != 0 {
		t.Error("gate off: DescribeCapacityReservations was called")
	}
}
