package sqs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/sqs"
	"github.com/karpx/karpx/ec2sim"
)

// TestReceiveAndDelete: against the simulator's SQS (the SDK's AWS JSON
// 1.0 protocol), a sent message is received once with its body and
// SentTimestamp, is not delivered again while in flight, and is gone after
// Delete. A wrong queue name fails with an error naming the flag.
func TestReceiveAndDelete(t *testing.T) {
	const queue = "karpx-sqs-test"
	env := ec2apitest.Start(t, ec2sim.Config{InterruptionQueue: queue}, ec2api.Config{})
	ctx := context.Background()
	p := sqs.New(env.Client, queue)
	if _, err := env.Sim.SendRawMessage(`{"hello":"queue"}`); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	msgs, err := p.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Body != `{"hello":"queue"}` || msgs[0].ReceiptHandle == "" || msgs[0].ID == "" {
		t.Fatalf("received %+v, want the one message", msgs)
	}
	if d := before.Sub(msgs[0].SentAt); msgs[0].SentAt.IsZero() || d > time.Minute || d < -time.Minute {
		t.Errorf("SentAt %s, want about %s", msgs[0].SentAt, before)
	}
	if err := p.Delete(ctx, msgs[0]); err != nil {
		t.Fatal(err)
	}
	st, err := env.Sim.QueueStats(queue)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 1 || st.Received != 1 {
		t.Fatalf("queue stats %+v, want 1 received and deleted", st)
	}
	if left, _ := env.Sim.QueueMessages(queue); len(left) != 0 {
		t.Fatalf("%d messages left", len(left))
	}

	_, err = sqs.New(env.Client, "no-such-queue").Receive(ctx)
	if err == nil || !strings.Contains(err.Error(), "--interruption-queue") {
		t.Fatalf("Receive from a missing queue = %v, want an error naming --interruption-queue", err)
	}
}
