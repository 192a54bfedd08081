package disruption_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
)

// objectRecorder is a record.EventRecorder that keeps each event as
// "<kind> <name> <type> <reason> <message>", the kind from the object's Go
// type (the fake client's objects carry no TypeMeta).
type objectRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *objectRecorder) Event(o runtime.Object, eventtype, reason, message string) {
	kind := fmt.Sprintf("%T", o)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s %s", kind, o.(client.Object).GetName(), eventtype, reason, message))
}

func (r *objectRecorder) Eventf(o runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(o, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r *objectRecorder) AnnotatedEventf(o runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(o, eventtype, reason, format, args...)
}

// take returns the events with reason recorded since the last take.
func (r *objectRecorder) take(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if strings.Fields(e)[3] == reason {
			out = append(out, e)
		}
	}
	r.events = nil
	return out
}

// budgetEnv is one disruption Controller (kept across passes, as in the
// operator) over c's objects, with an objectRecorder.
func budgetEnv(t *testing.T, c *cluster) (*disruption.Controller, *objectRecorder) {
	t.Helper()
	c.kube = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(c.objs...).
		WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	rec := &objectRecorder{}
	return disruption.New(c.kube, c.kube, fakeCloud{}, rec, c.clock, c.opts), rec
}

// TestBudgetOfZeroIsOneNodePoolEventPerMinute: a NodePool whose budget
// allows no disruption while an empty node waits gets Karpenter's
// DisruptionBlocked event on the NodePool ("No allowed disruptions for
// disruption reason Empty due to blocking budget",
// NodePoolBlockedForDisruptionReason, v1.14.0), once per minute however
// many passes run, and none on the waiting Node or NodeClaim.
func TestBudgetOfZeroIsOneNodePoolEventPerMinute(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "0")
	c.node("n", "p", time.Hour, nil)
	ctrl, rec := budgetEnv(t, c)
	want := "NodePool p Normal DisruptionBlocked No allowed disruptions for disruption reason Empty due to blocking budget"
	for i, step := range []struct {
		advance time.Duration
		events  int
	}{{0, 1}, {10 * time.Second, 0}, {49 * time.Second, 0}, {time.Second, 1}} {
		c.clock.Step(step.advance)
		if _, err := ctrl.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := rec.take("DisruptionBlocked")
		if len(got) != step.events || (len(got) == 1 && got[0] != want) {
			t.Fatalf("pass %d (+%s): DisruptionBlocked events %q, want %d of %q", i, step.advance, got, step.events, want)
		}
	}
	if !c.exists("n") {
		t.Fatal("the empty node was deleted under a budget of zero nodes")
	}
}

// TestBudgetInUseIsNoEvent: a budget used up by the nodes this pass
// deletes holds the other empty nodes back without any DisruptionBlocked
// event (Karpenter's emptiness skips them silently; the budget frees
// itself), and a NodePool whose budget allows disruptions gets none.
func TestBudgetInUseIsNoEvent(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "1")
	for i := 0; i < 3; i++ {
		c.node(fmt.Sprintf("n%d", i), "p", time.Hour, nil)
	}
	ctrl, rec := budgetEnv(t, c)
	if _, err := ctrl.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := c.left(3); left != 2 {
		t.Fatalf("%d of 3 empty nodes left after a pass under a budget of 1 node, want 2", left)
	}
	if got := rec.take("DisruptionBlocked"); len(got) != 0 {
		t.Fatalf("DisruptionBlocked events %q, want none: the budget is in use, not zero", got)
	}
}
