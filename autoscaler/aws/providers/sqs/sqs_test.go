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

// TestOwnerAccount: the account is read from the URL GetQueueUrl returns
// (the simulator's, /<account>/<name> on its endpoint), and URLs of other
// forms are refused with an error naming the URL; control: AWS's
// documented form.
func TestOwnerAccount(t *testing.T) {
	const queue = "karpx-sqs-owner"
	env := ec2apitest.Start(t, ec2sim.Config{InterruptionQueue: queue, AccountID: "210987654321"}, ec2api.Config{})
	got, err := sqs.New(env.Client, queue).OwnerAccount(context.Background())
	if err != nil || got != "210987654321" {
		t.Fatalf("OwnerAccount = %q, %v; want the simulator's account 210987654321", got, err)
	}
	if _, err := sqs.New(env.Client, "no-such-queue").OwnerAccount(context.Background()); err == nil || !strings.Contains(err.Error(), "--interruption-queue") {
		t.Fatalf("OwnerAccount of a missing queue = %v, want the resolve error", err)
	}
	for raw, want := range map[string]string{
		"https://sqs.us-east-2.amazonaws.com/123456789012/MyQueue": "123456789012",
		"https://sqs.eu-west-1.amazonaws.com/000000000001/q.fifo/": "000000000001",
		"https://sqs.us-east-2.amazonaws.com/MyQueue":              "",
		"https://sqs.us-east-2.amazonaws.com/12345678901/MyQueue":  "",
		"https://sqs.us-east-2.amazonaws.com/12345678901x/MyQueue": "",
		"https://sqs.us-east-2.amazonaws.com/123456789012/a/b":     "",
		"https://sqs.us-east-2.amazonaws.com/123456789012/":        "",
		"://not a url": "",
	} {
		got, err := sqs.AccountOfURL(raw)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("AccountOfURL(%q) = %q, %v; want %q", raw, got, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), raw) {
			t.Errorf("AccountOfURL(%q) error %q does not name the URL", raw, err)
		}
	}
}
