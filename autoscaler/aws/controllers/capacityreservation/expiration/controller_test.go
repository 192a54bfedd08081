package expiration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/aws/controllers/capacityreservation/expiration"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/ec2sim"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// env is the EC2 simulator with a Capacity Block ending at end and an
// ODCR ending at the same time, NodeClaims in each, one in none, and a
// Controller describing them through the real provider, on one fake
// clock.
type env struct {
	clk       *testingclock.FakeClock
	kube      client.Client
	recorder  *record.FakeRecorder
	c         *expiration.Controller
	block, cr string
	end       time.Time
}

func newEnv(t *testing.T, end time.Time) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	e := ec2apitest.Start(t, ec2sim.Config{Clock: clk, Throttle: ec2sim.ThrottleConfig{Disabled: true}}, ec2api.Config{RetryMaxAttempts: 1})
	block, err := e.Sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, ReservationType: ec2sim.ReservationTypeCapacityBlock, EndDate: end})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := e.Sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 1, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, EndDate: end})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(name, reservation, rtype string) []client.Object {
		labels := map[string]string{karpv1.NodePoolLabelKey: "gpu", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}
		if reservation != "" {
			labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeReserved
			labels[awscloud.LabelCapacityReservationID], labels[awscloud.LabelCapacityReservationType] = reservation, rtype
		}
		return []client.Object{
			&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: karpv1.NodeClaimStatus{NodeName: "node-" + name}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: labels}},
		}
	}
	var objs []client.Object
	objs = append(objs, claim("block-a", block, "capacity-block")...)
	objs = append(objs, claim("block-b", block, "capacity-block")...)
	objs = append(objs, claim("odcr", cr, "default")...)
	objs = append(objs, claim("plain", "", "")...)
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	rec := record.NewFakeRecorder(100)
	provider := capacityreservation.NewProvider(e.Client, cache.DefaultTTLs(), clk)
	return &env{clk: clk, kube: kube, recorder: rec, block: block, cr: cr, end: end,
		c: expiration.New(kube, provider, rec, clk, expiration.Options{})}
}

// claims returns the names of the NodeClaims left.
func (e *env) claims(t *testing.T) string {
	t.Helper()
	var list karpv1.NodeClaimList
	if err := e.kube.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nc := range list.Items {
		names = append(names, nc.Name)
	}
	return strings.Join(names, " ")
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// TestCapacityBlockDrainedWhenExpiring: the NodeClaims of a Capacity
// Block are deleted once the block is within 40 minutes of its end, not a
// second before; those of an ODCR ending at the same time and those
// outside any reservation stay. The poll before the mark asks to be woken
// at it.
func TestCapacityBlockDrainedWhenExpiring(t *testing.T) {
	end := t0.Add(capacityreservation.ExpiringWindow + 20*time.Second)
	e := newEnv(t, end)
	ctx := context.Background()
	wait, err := e.c.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wait != 20*time.Second {
		t.Errorf("wait before the block expires: %s, want 20s (its 40-minute mark)", wait)
	}
	if got := e.claims(t); got != "block-a block-b odcr plain" {
		t.Fatalf("NodeClaims 20 s before the mark: %s", got)
	}

	e.clk.SetTime(end.Add(-capacityreservation.ExpiringWindow - time.Second))
	if _, err := e.c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.claims(t); got != "block-a block-b odcr plain" {
		t.Fatalf("NodeClaims 1 s before the mark: %s", got)
	}

	e.clk.SetTime(end.Add(-capacityreservation.ExpiringWindow))
	wait, err = e.c.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.claims(t); got != "odcr plain" {
		t.Fatalf("NodeClaims at the mark: %s, want the block's deleted", got)
	}
	if wait != expiration.Interval {
		t.Errorf("wait with no block left to expire: %s, want %s", wait, expiration.Interval)
	}
	evs := e.events()
	if len(evs) != 4 {
		t.Fatalf("events: %q, want one on each of 2 NodeClaims and 2 Nodes", evs)
	}
	for _, ev := range evs {
		if !strings.HasPrefix(ev, "Warning "+expiration.ReasonTerminatingOnInterruption+" capacity block "+e.block) {
			t.Errorf("event %q", ev)
		}
	}
	// Nothing more to do on the next poll.
	if _, err := e.c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := e.events(); len(evs) != 0 {
		t.Errorf("events of a second poll: %q", evs)
	}
}

// TestDeletingNodeClaimLeftAlone: a NodeClaim already being deleted (its
// finalizer holds it) is not deleted again and gets no event.
func TestDeletingNodeClaimLeftAlone(t *testing.T) {
	end := t0.Add(time.Hour)
	e := newEnv(t, end)
	ctx := context.Background()
	var nc karpv1.NodeClaim
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "block-a"}, &nc); err != nil {
		t.Fatal(err)
	}
	nc.Finalizers = []string{karpv1.TerminationFinalizer}
	if err := e.kube.Update(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Delete(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	e.clk.SetTime(end.Add(-capacityreservation.ExpiringWindow))
	if _, err := e.c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "block-b"}, &nc); !apierrors.IsNotFound(err) {
		t.Fatalf("block-b: %v, want deleted", err)
	}
	if evs := e.events(); len(evs) != 2 {
		t.Errorf("events: %q, want 2 (block-b and its Node), none for the NodeClaim being deleted", evs)
	}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "block-a"}, &nc); err != nil || nc.DeletionTimestamp.IsZero() {
		t.Errorf("block-a: %v, want still deleting", err)
	}
}

// TestHandlerTriggers: the NodeClaim informer handler asks for a poll
// when a NodeClaim is created in a reservation or labelled with one, and
// not for NodeClaims outside reservations or updates that keep or drop
// the label; triggers never block and coalesce.
func TestHandlerTriggers(t *testing.T) {
	e := newEnv(t, t0.Add(time.Hour))
	h := e.c.Handler()
	woken := func() bool {
		select {
		case <-e.c.WakeForTest():
			return true
		default:
			return false
		}
	}
	plain := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	labelled := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{awscloud.LabelCapacityReservationID: e.block}}}
	h.OnAdd(plain, false)
	h.OnUpdate(labelled, labelled)
	h.OnUpdate(labelled, plain)
	if woken() {
		t.Fatal("woken by a NodeClaim that did not join a reservation")
	}
	h.OnUpdate(plain, labelled)
	if !woken() {
		t.Fatal("not woken by a NodeClaim that joined a reservation")
	}
	h.OnAdd(labelled, false)
	h.OnAdd(labelled, false)
	if !woken() || woken() {
		t.Fatal("two creations in a reservation: want one coalesced wake")
	}
}
