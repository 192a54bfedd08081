package interruption

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/aws/controllers/interruption/messages"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/sqs"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/ec2sim"
)

// TestAgainstTheSimulatedQueue runs the controller over the real SQS
// protocol (aws-sdk-go-v2 against ec2sim) while ReceiveMessage answers
// 500 InternalError and then RequestThrottled for 2 s each: nothing in
// the cluster changes while it fails; afterwards a duplicate, an
// out-of-order pair, a malformed and an unknown message are all handled
// and every message is deleted, none left in flight.
func TestAgainstTheSimulatedQueue(t *testing.T) {
	const queue = "karpx-interruption-test"
	env := ec2apitest.Start(t, ec2sim.Config{InterruptionQueue: queue}, ec2api.Config{RetryMaxAttempts: 2})
	const inst3 = "i-0123456789abcdef3"
	var objs []client.Object
	for i, id := range []string{inst1, inst2, inst3} {
		name := []string{"nc-1", "nc-2", "nc-3"}[i]
		objs = append(objs,
			&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.xlarge", corev1.LabelTopologyZone: "us-east-1a"}},
				Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + id, NodeName: "node-" + name}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id}})
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithIndex(&karpv1.NodeClaim{}, InstanceIDField, instanceIDIndex).Build()
	if err := env.Sim.Faults().Add(
		ec2sim.FaultRule{Action: "ReceiveMessage", Code: "InternalError", HTTPStatus: 500, For: metav1.Duration{Duration: 2 * time.Second}},
		ec2sim.FaultRule{Action: "ReceiveMessage", Code: "RequestThrottled", For: metav1.Duration{Duration: 4 * time.Second}},
	); err != nil {
		t.Fatal(err)
	}
	bodies := []string{spot(inst1), spot(inst1), "{not an event", body("EC2 AMI State Change", "aws.ec2", `{}`),
		stateChange(inst2, "terminated"), spot(inst2)}
	for _, b := range bodies {
		if _, err := env.Sim.SendRawMessage(b); err != nil {
			t.Fatal(err)
		}
	}
	receiveErrors := testutil.ToFloat64(queueErrors.WithLabelValues("receive"))
	offerings := &fakeOfferings{}
	triggers := 0
	ctrl := New(kube, sqs.New(env.Client, queue), offerings, record.NewFakeRecorder(100), clock.RealClock{}, func() { triggers++ },
		Options{MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, Region: testRegion})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Start(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			cancel()
			<-done
			stopped = true
		}
	}
	defer stop()
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		for _, n := range []string{"nc-1", "nc-2", "nc-3"} {
			var nc karpv1.NodeClaim
			if err := kube.Get(ctx, client.ObjectKey{Name: n}, &nc); err != nil || len(nc.Annotations) != 0 {
				t.Fatalf("NodeClaim %s changed while the queue failed (%v, %v)", n, err, nc.Annotations)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := env.Sim.QueueStats(queue)
		if err != nil {
			t.Fatal(err)
		}
		if st.Deleted == int64(len(bodies)) {
			left, _ := env.Sim.QueueMessages(queue)
			if len(left) != 0 {
				t.Fatalf("%d messages left after all were deleted", len(left))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue stats %+v: not every message deleted within 30 s", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	ctx = context.Background()
	if d := testutil.ToFloat64(queueErrors.WithLabelValues("receive")) - receiveErrors; d < 1 {
		t.Errorf("no failed receive counted (the SDK's retries absorbed the faults?)")
	}
	var nc1 karpv1.NodeClaim
	if err := kube.Get(ctx, client.ObjectKey{Name: "nc-1"}, &nc1); err != nil || nc1.Annotations[cloudprovider.InterruptionAnnotationKey] != "spot_interrupted" {
		t.Fatalf("nc-1: %v %v, want marked spot_interrupted", err, nc1.Annotations)
	}
	if err := kube.Get(ctx, client.ObjectKey{Name: "nc-2"}, &karpv1.NodeClaim{}); err == nil {
		t.Error("nc-2 (terminated instance) not deleted")
	}
	var nc3 karpv1.NodeClaim
	if err := kube.Get(ctx, client.ObjectKey{Name: "nc-3"}, &nc3); err != nil || len(nc3.Annotations) != 0 {
		t.Fatalf("healthy nc-3 changed: %v %v", err, nc3.Annotations)
	}
	if triggers != 1 || len(offerings.marked) != 2 {
		t.Errorf("triggers %d (want 1: the duplicate is not acted on), offerings marked %v (want m5.xlarge/us-east-1a twice)", triggers, offerings.marked)
	}
}

// TestForgedMessageOverTheSimulatedQueue: over the real SQS protocol, the
// controller reads the queue owner from the URL GetQueueUrl returns (the
// simulator's account, 210987654321 here) and rejects a spot warning that
// names any other account (the test events' 123456789012): counted,
// deleted, nothing changed. Control: the same warning with the owner's
// account marks the NodeClaim.
func TestForgedMessageOverTheSimulatedQueue(t *testing.T) {
	const queue, owner = "karpx-interruption-forged", "210987654321"
	env := ec2apitest.Start(t, ec2sim.Config{InterruptionQueue: queue, AccountID: owner}, ec2api.Config{})
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-1", Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.xlarge", corev1.LabelTopologyZone: "us-east-1a"}},
		Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + inst1, NodeName: "node-nc-1"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-nc-1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst1}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(nc, node).WithIndex(&karpv1.NodeClaim{}, InstanceIDField, instanceIDIndex).Build()
	offerings := &fakeOfferings{}
	triggers := 0
	ctrl := New(kube, sqs.New(env.Client, queue), offerings, record.NewFakeRecorder(100), clock.RealClock{}, func() { triggers++ }, Options{Region: testRegion})
	ctx := context.Background()
	poll := func() {
		t.Helper()
		st0, err := env.Sim.QueueStats(queue)
		if err != nil {
			t.Fatal(err)
		}
		if err := ctrl.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		if st, _ := env.Sim.QueueStats(queue); st.Deleted != st0.Deleted+1 || st.Visible+st.InFlight != 0 {
			t.Fatalf("queue stats %+v after a poll, want the message deleted", st)
		}
	}

	rejected0 := testutil.ToFloat64(rejectedMessages.WithLabelValues(messages.RejectAccount))
	if _, err := env.Sim.SendRawMessage(spot(inst1)); err != nil { // account 123456789012
		t.Fatal(err)
	}
	poll()
	if d := testutil.ToFloat64(rejectedMessages.WithLabelValues(messages.RejectAccount)) - rejected0; d != 1 {
		t.Errorf("rejected{reason=account_mismatch} grew by %v, want 1", d)
	}
	var got karpv1.NodeClaim
	if err := kube.Get(ctx, client.ObjectKey{Name: "nc-1"}, &got); err != nil || len(got.Annotations) != 0 || triggers != 0 || len(offerings.marked) != 0 {
		t.Fatalf("a forged message acted: %v, annotations %v, triggers %d, offerings %v", err, got.Annotations, triggers, offerings.marked)
	}

	if _, err := env.Sim.SendRawMessage(withOrigin(spot(inst1), owner, testRegion)); err != nil {
		t.Fatal(err)
	}
	poll()
	if err := kube.Get(ctx, client.ObjectKey{Name: "nc-1"}, &got); err != nil || got.Annotations[cloudprovider.InterruptionAnnotationKey] != string(messages.KindSpotInterruption) || triggers != 1 {
		t.Fatalf("control: %v, annotations %v, triggers %d; want marked spot_interrupted", err, got.Annotations, triggers)
	}
}
