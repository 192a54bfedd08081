package interruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/aws/controllers/interruption/messages"
	"github.com/karpx/karpx/autoscaler/aws/providers/sqs"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// fakeQueue serves batches of messages (or errors) in order and records
// deletions.
type fakeQueue struct {
	mu        sync.Mutex
	batches   []func() ([]sqs.Message, error)
	deleted   []string
	deleteErr error
	received  int
}

func (q *fakeQueue) Name() string { return "test-queue" }

// OwnerAccount is the account of the test events (body).
func (q *fakeQueue) OwnerAccount(context.Context) (string, error) { return testAccount, nil }

func (q *fakeQueue) Receive(ctx context.Context) ([]sqs.Message, error) {
	q.mu.Lock()
	if len(q.batches) == 0 {
		q.mu.Unlock()
		<-ctx.Done() // an empty long poll, until the test ends
		return nil, ctx.Err()
	}
	next := q.batches[0]
	q.batches = q.batches[1:]
	q.received++
	q.mu.Unlock()
	return next()
}

func (q *fakeQueue) Delete(_ context.Context, m sqs.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleteErr != nil {
		return q.deleteErr
	}
	q.deleted = append(q.deleted, m.ID)
	return nil
}

func (q *fakeQueue) deletedIDs() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.deleted...)
}

type fakeOfferings struct{ marked []string }

func (o *fakeOfferings) MarkUnavailable(it, zone, ct string) {
	o.marked = append(o.marked, ct+"/"+zone+"/"+it)
}

var eventTime = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

// testAccount and testRegion are the queue owner's account and the
// controller's region in these tests, and those of the events body builds.
const (
	testAccount = "123456789012"
	testRegion  = "us-east-1"
)

func body(detailType, source, detail string) string {
	return fmt.Sprintf(`{"version":"0","id":"e-%d","detail-type":%q,"source":%q,"account":%q,"time":%q,"region":%q,"resources":[],"detail":%s}`,
		len(detail), detailType, source, testAccount, eventTime.Format(time.RFC3339), testRegion, detail)
}

func spot(id string) string {
	return body(messages.DetailTypeSpotInterruption, messages.SourceEC2, `{"instance-id":"`+id+`","instance-action":"terminate"}`)
}

func stateChange(id, state string) string {
	return body(messages.DetailTypeStateChange, messages.SourceEC2, `{"instance-id":"`+id+`","state":"`+state+`"}`)
}

type env struct {
	t         *testing.T
	kube      client.Client
	queue     *fakeQueue
	offerings *fakeOfferings
	recorder  *record.FakeRecorder
	clock     *clocktesting.FakeClock
	triggers  int
	ctrl      *Controller
}

const (
	inst1 = "i-0123456789abcdef0"
	inst2 = "i-0123456789abcdef1"
)

// newEnv has two spot NodeClaims with Nodes, of instances inst1 and inst2.
func newEnv(t *testing.T, opts Options, funcs *interceptor.Funcs) *env {
	if opts.Region == "" {
		opts.Region = testRegion
	}
	e := &env{t: t, queue: &fakeQueue{}, offerings: &fakeOfferings{}, recorder: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(eventTime.Add(5 * time.Second))}
	var objs []client.Object
	for i, id := range []string{inst1, inst2} {
		name := fmt.Sprintf("nc-%d", i+1)
		objs = append(objs,
			&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "spot",
				corev1.LabelInstanceTypeStable: "m5.xlarge", corev1.LabelTopologyZone: "us-east-1b", karpv1.CapacityTypeLabelKey: "spot"}},
				Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1b/" + id, NodeName: "node-" + name}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1b/" + id}})
	}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithIndex(&karpv1.NodeClaim{}, InstanceIDField, instanceIDIndex)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	e.kube = b.Build()
	e.ctrl = New(e.kube, e.queue, e.offerings, e.recorder, e.clock, func() { e.triggers++ }, opts)
	return e
}

func (e *env) handle(bodies ...string) {
	var msgs []sqs.Message
	for i, b := range bodies {
		msgs = append(msgs, sqs.Message{ID: fmt.Sprintf("m%d", i), ReceiptHandle: fmt.Sprintf("r%d", i), Body: b})
	}
	e.ctrl.Handle(context.Background(), msgs)
}

func (e *env) nodeClaim(name string) *karpv1.NodeClaim {
	var nc karpv1.NodeClaim
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: name}, &nc); err != nil {
		return nil
	}
	return &nc
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

// TestSpotInterruptionMarksOnceAndDeletesTheMessage: a spot warning marks
// the NodeClaim (kind, reclaim at event time + 2 min, drain halfway from
// now), puts the spot offering into the unavailable cache, records events
// on the NodeClaim and the Node, triggers disruption and deletes the
// message. The same warning delivered again, in the same batch and later,
// is deleted without acting twice.
func TestSpotInterruptionMarksOnceAndDeletesTheMessage(t *testing.T) {
	e := newEnv(t, Options{}, nil)
	deletedBefore := testutil.ToFloat64(deletedMessages)
	e.handle(spot(inst1), spot(inst1))
	nc := e.nodeClaim("nc-1")
	reclaim := eventTime.Add(messages.SpotNotice)
	drainBy := e.clock.Now().Add(reclaim.Sub(e.clock.Now()) / 2)
	if nc.Annotations[cloudprovider.InterruptionAnnotationKey] != "spot_interrupted" ||
		nc.Annotations[cloudprovider.InterruptionReclaimAtAnnotationKey] != reclaim.Format(time.RFC3339) ||
		nc.Annotations[cloudprovider.InterruptionDrainByAnnotationKey] != drainBy.Format(time.RFC3339) {
		t.Fatalf("annotations %v; want spot_interrupted, reclaim %s, drain by %s", nc.Annotations, reclaim, drainBy)
	}
	if e.nodeClaim("nc-2").Annotations[cloudprovider.InterruptionAnnotationKey] != "" {
		t.Fatal("the other NodeClaim was marked")
	}
	if got := strings.Join(e.offerings.marked, ","); got != "spot/us-east-1b/m5.xlarge,spot/us-east-1b/m5.xlarge" {
		t.Errorf("offerings marked %q, want spot/us-east-1b/m5.xlarge (once per delivery: it only restarts the TTL)", got)
	}
	evs := e.events()
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "Warning SpotInterrupted") || !strings.Contains(evs[0], inst1) {
		t.Fatalf("events %q, want one SpotInterrupted on the NodeClaim and one on the Node", evs)
	}
	if e.triggers != 1 {
		t.Errorf("disruption triggered %d times, want 1", e.triggers)
	}
	if got := e.queue.deletedIDs(); len(got) != 2 {
		t.Fatalf("deleted %v, want both deliveries", got)
	}
	if d := testutil.ToFloat64(deletedMessages) - deletedBefore; d != 2 {
		t.Errorf("karpenter_interruption_deleted_messages_total grew by %v, want 2", d)
	}
	// Delivered again after a restart of the controller (its memory is
	// empty; the mark on the NodeClaim says it is done).
	e.ctrl = New(e.kube, e.queue, e.offerings, e.recorder, e.clock, func() { e.triggers++ }, Options{Region: testRegion})
	e.handle(spot(inst1))
	if e.triggers != 1 || len(e.events()) != 0 {
		t.Fatalf("a redelivery after a restart acted again (triggers %d)", e.triggers)
	}
}

// TestOutOfOrderAndTerminated: "terminated" deletes the NodeClaim and its
// Node at once; the spot warning that arrives after it finds nothing to
// act on and is deleted; "running" and "pending" notifications are no-ops.
func TestOutOfOrderAndTerminated(t *testing.T) {
	e := newEnv(t, Options{}, nil)
	e.handle(stateChange(inst1, "pending"), stateChange(inst1, "running"))
	if nc := e.nodeClaim("nc-1"); nc == nil || len(nc.Annotations) != 0 {
		t.Fatalf("pending/running changed the NodeClaim: %+v", nc)
	}
	e.handle(stateChange(inst1, "terminated"), spot(inst1), stateChange(inst1, "terminated"))
	if e.nodeClaim("nc-1") != nil {
		t.Fatal("NodeClaim of a terminated instance not deleted")
	}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: "node-nc-1"}, &corev1.Node{}); err == nil {
		t.Fatal("Node of a terminated instance not deleted")
	}
	if e.nodeClaim("nc-2") == nil {
		t.Fatal("the other NodeClaim was deleted")
	}
	if got := e.queue.deletedIDs(); len(got) != 5 {
		t.Fatalf("deleted %v, want all 5 messages", got)
	}
	if e.triggers != 0 {
		t.Errorf("disruption triggered for a NodeClaim that is gone")
	}
}

// TestMalformedAndUnknownMessagesAreCountedAndDeleted: nothing in the
// cluster changes, every message is deleted, malformed ones are counted
// as such and unknown ones as no_op.
func TestMalformedAndUnknownMessagesAreCountedAndDeleted(t *testing.T) {
	e := newEnv(t, Options{}, nil)
	malformed0 := testutil.ToFloat64(receivedMessages.WithLabelValues(MessageTypeMalformed))
	noop0 := testutil.ToFloat64(receivedMessages.WithLabelValues(string(messages.KindNoOp)))
	e.handle("not json at all", `{"detail-type":"EC2 Spot Instance Interruption Warning"}`,
		body(messages.DetailTypeSpotInterruption, messages.SourceEC2, `{"instance-id":"i-nothex!!","instance-action":"terminate"}`),
		body("EC2 AMI State Change", messages.SourceEC2, `{}`), body("Object Created", "aws.s3", `{"bucket":{}}`))
	if d := testutil.ToFloat64(receivedMessages.WithLabelValues(MessageTypeMalformed)) - malformed0; d != 3 {
		t.Errorf("malformed counted %v, want 3", d)
	}
	if d := testutil.ToFloat64(receivedMessages.WithLabelValues(string(messages.KindNoOp))) - noop0; d != 2 {
		t.Errorf("no_op counted %v, want 2", d)
	}
	if got := e.queue.deletedIDs(); len(got) != 5 {
		t.Fatalf("deleted %v, want all 5", got)
	}
	for _, n := range []string{"nc-1", "nc-2"} {
		if nc := e.nodeClaim(n); nc == nil || len(nc.Annotations) != 0 {
			t.Fatalf("NodeClaim %s changed: %+v", n, nc)
		}
	}
	if len(e.events()) != 0 || e.triggers != 0 || len(e.offerings.marked) != 0 {
		t.Fatal("a malformed or unknown message had an effect")
	}
}

// TestRebalanceIsAnEventUnlessActedOn: without ActOnRebalance a
// rebalance recommendation records an event only; with it the node is
// marked like an interrupted one (but the offering stays available: EC2
// has not taken it back).
func TestRebalanceIsAnEventUnlessActedOn(t *testing.T) {
	rebalance := body(messages.DetailTypeRebalance, messages.SourceEC2, `{"instance-id":"`+inst1+`"}`)
	e := newEnv(t, Options{}, nil)
	e.handle(rebalance)
	if nc := e.nodeClaim("nc-1"); len(nc.Annotations) != 0 || e.triggers != 0 {
		t.Fatalf("rebalance acted on without the flag: %v", nc.Annotations)
	}
	if evs := e.events(); len(evs) != 2 || !strings.Contains(evs[0], "SpotRebalanceRecommendation") {
		t.Fatalf("events %q, want SpotRebalanceRecommendation on NodeClaim and Node", evs)
	}
	e = newEnv(t, Options{ActOnRebalance: true}, nil)
	e.handle(rebalance)
	if nc := e.nodeClaim("nc-1"); nc.Annotations[cloudprovider.InterruptionAnnotationKey] != "rebalance_recommendation" || e.triggers != 1 {
		t.Fatalf("rebalance not acted on with the flag: %v", nc.Annotations)
	}
	if len(e.offerings.marked) != 0 {
		t.Errorf("offerings marked on a rebalance: %v", e.offerings.marked)
	}
}

// TestFailedHandlingLeavesTheMessage: when the API server refuses the
// mark, the message stays on the queue (it comes back after its
// visibility timeout) and the next delivery acts.
func TestFailedHandlingLeavesTheMessage(t *testing.T) {
	fail := true
	e := newEnv(t, Options{}, &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if fail {
			return errors.New("etcdserver: request timed out")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	e.handle(spot(inst1))
	if got := e.queue.deletedIDs(); len(got) != 0 {
		t.Fatalf("deleted %v although handling failed", got)
	}
	fail = false
	e.handle(spot(inst1))
	if got := e.queue.deletedIDs(); len(got) != 1 || e.nodeClaim("nc-1").Annotations[cloudprovider.InterruptionAnnotationKey] == "" {
		t.Fatalf("redelivery: deleted %v, annotations %v; want acted on and deleted", got, e.nodeClaim("nc-1").Annotations)
	}
}

// TestQueueErrorsNeverTouchTheCluster: while ReceiveMessage fails (5xx,
// throttling) the controller backs off (1 s, 2 s, 4 s … on the injected
// clock) and changes nothing; once the queue answers again the messages
// are handled and deleted. A failing DeleteMessage leaves the message to
// be redelivered, and the redelivery does not act again.
func TestQueueErrorsNeverTouchTheCluster(t *testing.T) {
	e := newEnv(t, Options{}, nil)
	throttled := errors.New("api error ThrottlingException: Rate exceeded")
	for range 4 {
		e.queue.batches = append(e.queue.batches, func() ([]sqs.Message, error) { return nil, throttled })
	}
	e.queue.batches = append(e.queue.batches,
		func() ([]sqs.Message, error) {
			return []sqs.Message{{ID: "a", ReceiptHandle: "ra", Body: spot(inst2)}}, nil
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.ctrl.Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	waitFor := func(what string, cond func() bool) {
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	received := func() int { e.queue.mu.Lock(); defer e.queue.mu.Unlock(); return e.queue.received }
	for i, backoff := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		waitFor("the backoff timer", e.clock.HasWaiters)
		if nc := e.nodeClaim("nc-2"); nc == nil || len(nc.Annotations) != 0 || len(e.queue.deletedIDs()) != 0 {
			t.Fatal("the cluster or the queue changed while receiving failed")
		}
		e.clock.Step(backoff - time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		if received() != i+1 {
			t.Fatalf("polled again before the %s backoff ended", backoff)
		}
		e.clock.Step(time.Millisecond)
		waitFor("the next poll", func() bool { return received() == i+2 })
	}
	for time.Now().Before(deadline) && len(e.queue.deletedIDs()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := e.queue.deletedIDs(); len(got) != 1 || e.nodeClaim("nc-2").Annotations[cloudprovider.InterruptionAnnotationKey] != "spot_interrupted" {
		t.Fatalf("after recovery: deleted %v, annotations %v", got, e.nodeClaim("nc-2").Annotations)
	}
	if e.nodeClaim("nc-1") == nil || len(e.nodeClaim("nc-1").Annotations) != 0 {
		t.Fatal("a healthy NodeClaim changed")
	}

	// DeleteMessage failing: the message is redelivered and not acted on
	// twice.
	e.queue.deleteErr = errors.New("api error InternalError: 500")
	e.handle(spot(inst1))
	e.queue.deleteErr = nil
	triggers := e.triggers
	e.handle(spot(inst1))
	if e.triggers != triggers || len(e.queue.deletedIDs()) != 2 {
		t.Fatalf("redelivery after a failed delete: triggers %d→%d, deleted %v", triggers, e.triggers, e.queue.deletedIDs())
	}
}

// withOrigin returns body with its envelope's account and region replaced.
func withOrigin(body, account, region string) string {
	body = strings.Replace(body, `"account":"`+testAccount+`"`, `"account":"`+account+`"`, 1)
	return strings.Replace(body, `"region":"`+testRegion+`"`, `"region":"`+region+`"`, 1)
}

// TestForeignMessagesMoveNothing: a spot warning, a terminated
// notification and a scheduled change for this cluster's instances but of
// another account, or of another region, are each counted by reason,
// deleted, and change nothing: no annotation, no deletion, no event, no
// offering marked, no disruption pass. Control: the same spot warning with
// the queue owner's account and the controller's region marks the
// NodeClaim.
func TestForeignMessagesMoveNothing(t *testing.T) {
	e := newEnv(t, Options{}, nil)
	account0 := testutil.ToFloat64(rejectedMessages.WithLabelValues(messages.RejectAccount))
	region0 := testutil.ToFloat64(rejectedMessages.WithLabelValues(messages.RejectRegion))
	rejected0 := testutil.ToFloat64(receivedMessages.WithLabelValues(MessageTypeRejected))
	spot0 := testutil.ToFloat64(receivedMessages.WithLabelValues(string(messages.KindSpotInterruption)))
	health := body(messages.DetailTypeHealth, messages.SourceHealth,
		`{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"`+inst1+`"},{"entityValue":"`+inst2+`"}]}`)
	e.handle(
		withOrigin(spot(inst1), "999988887777", testRegion),
		withOrigin(stateChange(inst2, "terminated"), "999988887777", testRegion),
		withOrigin(health, "999988887777", testRegion),
		withOrigin(spot(inst1), testAccount, "eu-west-1"),
		withOrigin(stateChange(inst2, "terminated"), testAccount, "eu-west-1"),
	)
	if d := testutil.ToFloat64(rejectedMessages.WithLabelValues(messages.RejectAccount)) - account0; d != 3 {
		t.Errorf("rejected{reason=account_mismatch} grew by %v, want 3", d)
	}
	if d := testutil.ToFloat64(rejectedMessages.WithLabelValues(messages.RejectRegion)) - region0; d != 2 {
		t.Errorf("rejected{reason=region_mismatch} grew by %v, want 2", d)
	}
	if d := testutil.ToFloat64(receivedMessages.WithLabelValues(MessageTypeRejected)) - rejected0; d != 5 {
		t.Errorf("received{message_type=rejected} grew by %v, want 5", d)
	}
	if d := testutil.ToFloat64(receivedMessages.WithLabelValues(string(messages.KindSpotInterruption))) - spot0; d != 0 {
		t.Errorf("a rejected message was counted as spot_interrupted (%v)", d)
	}
	if got := e.queue.deletedIDs(); len(got) != 5 {
		t.Fatalf("deleted %v, want all 5 (so they are not redelivered forever)", got)
	}
	for _, n := range []string{"nc-1", "nc-2"} {
		nc := e.nodeClaim(n)
		if nc == nil {
			t.Fatalf("NodeClaim %s deleted by a foreign message", n)
		}
		if len(nc.Annotations) != 0 || !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("NodeClaim %s changed by a foreign message: annotations %v, deletion %v", n, nc.Annotations, nc.DeletionTimestamp)
		}
		if err := e.kube.Get(context.Background(), client.ObjectKey{Name: "node-" + n}, &corev1.Node{}); err != nil {
			t.Fatalf("Node of %s: %v", n, err)
		}
	}
	if evs := e.events(); len(evs) != 0 || e.triggers != 0 || len(e.offerings.marked) != 0 {
		t.Fatalf("a foreign message had an effect: events %q, triggers %d, offerings %v", evs, e.triggers, e.offerings.marked)
	}

	// Control: the same warning from this account and region acts.
	e.handle(spot(inst1))
	if nc := e.nodeClaim("nc-1"); nc.Annotations[cloudprovider.InterruptionAnnotationKey] != string(messages.KindSpotInterruption) || e.triggers != 1 {
		t.Fatalf("control: annotations %v, triggers %d; want marked spot_interrupted and one disruption pass", nc.Annotations, e.triggers)
	}
}

// ownerlessQueue is a queue whose owner account cannot be read.
type ownerlessQueue struct{ fakeQueue }

func (q *ownerlessQueue) OwnerAccount(context.Context) (string, error) {
	return "", errors.New(`interruption queue URL "http://proxy/q": the path is not /<12-digit account id>/<queue name>`)
}

// TestUnknownOwnerLeavesMessages: when the queue's owner account cannot be
// read, no message is acted on or deleted (they come back after their
// visibility timeout). Control: TestSpotInterruptionMarksOnceAndDeletesTheMessage.
func TestUnknownOwnerLeavesMessages(t *testing.T) {
	e := newEnv(t, Options{}, nil)
	q := &ownerlessQueue{}
	ctrl := New(e.kube, q, e.offerings, e.recorder, e.clock, func() { e.triggers++ }, Options{Region: testRegion})
	ctrl.Handle(context.Background(), []sqs.Message{{ID: "m0", ReceiptHandle: "r0", Body: spot(inst1)}})
	if len(q.deletedIDs()) != 0 || e.triggers != 0 || len(e.nodeClaim("nc-1").Annotations) != 0 {
		t.Fatalf("acted (%d triggers) or deleted %v without knowing the owner account", e.triggers, q.deletedIDs())
	}
}
