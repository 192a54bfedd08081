package garbagecollection

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// fakeCloud is an in-memory cloud: instances by providerID.
type fakeCloud struct {
	cloudprovider.CloudProvider
	instances map[string]*karpv1.NodeClaim
	listErr   error
	deleted   []string
	// shuttingDown keeps deleted instances listed, as EC2 does while they
	// shut down.
	shuttingDown bool
}

func (f *fakeCloud) List(context.Context) ([]*karpv1.NodeClaim, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*karpv1.NodeClaim
	for _, in := range f.instances {
		out = append(out, in)
	}
	return out, nil
}

func (f *fakeCloud) Get(_ context.Context, id string) (*karpv1.NodeClaim, error) {
	if in, ok := f.instances[id]; ok {
		return in, nil
	}
	return nil, &cloudprovider.NodeClaimNotFoundError{Err: errors.New(id)}
}

func (f *fakeCloud) Delete(_ context.Context, nc *karpv1.NodeClaim) error {
	f.deleted = append(f.deleted, nc.Status.ProviderID)
	if !f.shuttingDown {
		delete(f.instances, nc.Status.ProviderID)
	}
	return nil
}

func instance(name, id string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{ProviderID: id}}
}

func setup(t *testing.T, claims ...client.Object) (*Collector, *fakeCloud, client.Client, *clocktesting.FakeClock) {
	t.Helper()
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(claims...).Build()
	cloud := &fakeCloud{instances: map[string]*karpv1.NodeClaim{}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := New(kube, cloud, record.NewFakeRecorder(10), Options{Grace: time.Minute, Clock: clk})
	return c, cloud, kube, clk
}

func TestOrphanTerminatedOnlyAfterGrace(t *testing.T) {
	c, cloud, _, now := setup(t, instance("claimed", "aws:///a/i-1"), instance("launching", ""))
	cloud.instances["aws:///a/i-1"] = instance("claimed", "aws:///a/i-1")
	cloud.instances["aws:///a/i-2"] = instance("leaked", "aws:///a/i-2")
	// Claimed by name only: CreateFleet returned, status not written yet.
	cloud.instances["aws:///a/i-3"] = instance("launching", "aws:///a/i-3")

	c.Pass(context.Background())
	if len(cloud.deleted) != 0 {
		t.Fatalf("deleted %v on first sight", cloud.deleted)
	}
	now.Step(2 * time.Minute)
	c.Pass(context.Background())
	if len(cloud.deleted) != 1 || cloud.deleted[0] != "aws:///a/i-2" {
		t.Fatalf("deleted %v, want only the unclaimed aws:///a/i-2", cloud.deleted)
	}
}

// An instance tagged with the name of a NodeClaim that claims another
// instance by providerID is a second launch for it (a restarted
// controller launched again with another request, so EC2's ClientToken
// did not return the first instance): terminated after Grace, while the
// NodeClaim's own instance stays.
func TestSecondInstanceOfALaunchedNodeClaimIsAnOrphan(t *testing.T) {
	c, cloud, _, now := setup(t, instance("claimed", "aws:///a/i-1"))
	cloud.instances["aws:///a/i-1"] = instance("claimed", "aws:///a/i-1")
	cloud.instances["aws:///a/i-9"] = instance("claimed", "aws:///a/i-9")
	c.Pass(context.Background())
	now.Step(2 * time.Minute)
	c.Pass(context.Background())
	if len(cloud.deleted) != 1 || cloud.deleted[0] != "aws:///a/i-9" {
		t.Fatalf("deleted %v, want only the second instance aws:///a/i-9", cloud.deleted)
	}
}

func TestShuttingDownOrphanTerminatedOnce(t *testing.T) {
	c, cloud, _, now := setup(t)
	cloud.shuttingDown = true
	cloud.instances["aws:///a/i-2"] = instance("leaked", "aws:///a/i-2")
	c.Pass(context.Background())
	for range 4 {
		now.Step(2 * time.Minute)
		c.Pass(context.Background())
	}
	if len(cloud.deleted) != 1 {
		t.Fatalf("terminated %v while it shut down, want once", cloud.deleted)
	}
	// Gone from EC2's answers, then listed again (a new orphan with the
	// same id cannot happen, but the memory must not grow forever).
	delete(cloud.instances, "aws:///a/i-2")
	c.Pass(context.Background())
	if len(c.terminated) != 0 {
		t.Fatalf("still remembers %v after EC2 stopped listing it", c.terminated)
	}
}

func TestFailedListChangesNothing(t *testing.T) {
	c, cloud, kube, now := setup(t, instance("healthy", "aws:///a/i-1"))
	cloud.listErr = errors.New("RequestLimitExceeded")
	for range 5 {
		c.Pass(context.Background())
		now.Step(10 * time.Minute)
	}
	var nc karpv1.NodeClaim
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "healthy"}, &nc); err != nil {
		t.Fatalf("NodeClaim deleted after throttled lists: %v", err)
	}
}

func TestNodeClaimWithGoneInstanceDeletedAfterGrace(t *testing.T) {
	c, _, kube, now := setup(t, instance("orphan-claim", "aws:///a/i-9"))
	c.Pass(context.Background())
	var nc karpv1.NodeClaim
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "orphan-claim"}, &nc); err != nil {
		t.Fatalf("deleted before grace: %v", err)
	}
	now.Step(2 * time.Minute)
	c.Pass(context.Background())
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "orphan-claim"}, &nc); err == nil {
		t.Fatal("NodeClaim whose instance is gone was kept")
	}
}

// A NodeClaim noted as instance-gone that leaves the cluster before its
// grace ends (a user deleted it) is forgotten, not remembered for ever.
func TestClockForgottenWhenNodeClaimLeaves(t *testing.T) {
	c, _, kube, _ := setup(t, instance("short-lived", "aws:///a/i-7"))
	c.Pass(context.Background())
	if _, ok := c.goneSince["aws:///a/i-7"]; !ok {
		t.Fatal("first pass did not start the clock")
	}
	if err := kube.Delete(context.Background(), instance("short-lived", "aws:///a/i-7")); err != nil {
		t.Fatal(err)
	}
	c.Pass(context.Background())
	if len(c.goneSince) != 0 || len(c.orphanSince) != 0 {
		t.Fatalf("clocks kept for ids no longer seen: gone %v orphan %v", c.goneSince, c.orphanSince)
	}
}
