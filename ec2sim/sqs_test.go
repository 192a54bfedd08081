package ec2sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

const testQueue = "karpx-interruptions"

// sqsEnv is a simulator with an interruption queue, a fake clock and an
// SDK SQS client.
type sqsEnv struct {
	*testEnv
	clk *testingclock.FakeClock
	sqs *sqs.Client
	url string
}

func newSQSEnv(t *testing.T, cfg Config) *sqsEnv {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	cfg.Clock = clk
	if cfg.InterruptionQueue == "" {
		cfg.InterruptionQueue = testQueue
	}
	env := &sqsEnv{testEnv: newTestEnv(t, cfg), clk: clk}
	env.sqs = env.sqsClient(1)
	env.url = env.endpoint + "/123456789012/" + testQueue
	return env
}

// sqsClient returns an SQS client with maxAttempts attempts per call.
func (e *testEnv) sqsClient(maxAttempts int) *sqs.Client {
	return sqs.NewFromConfig(awsConfig(), func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(e.endpoint)
		o.Retryer = newRetryer(maxAttempts)
	})
}

func (e *sqsEnv) receive(t *testing.T, in *sqs.ReceiveMessageInput) []sqstypes.Message {
	t.Helper()
	if in.QueueUrl == nil {
		in.QueueUrl = aws.String(e.url)
	}
	out, err := e.sqs.ReceiveMessage(context.Background(), in)
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

func (e *sqsEnv) stats(t *testing.T) QueueStats {
	t.Helper()
	st, err := e.sim.QueueStats(testQueue)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSQSQueueURLAndAttributes(t *testing.T) {
	env := newSQSEnv(t, Config{})
	ctx := context.Background()
	u, err := env.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(testQueue)})
	if err != nil || *u.QueueUrl != env.url {
		t.Fatalf("GetQueueUrl = %v, %v; want %s", u, err, env.url)
	}
	_, err = env.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("other")})
	var notFound *sqstypes.QueueDoesNotExist
	if !errors.As(err, &notFound) {
		t.Fatalf("unknown queue: want QueueDoesNotExist, got %T %v", err, err)
	}
	// awsQueryCompatible: the SDK reports SQS's query code.
	apiErr(t, err, "AWS.SimpleQueueService.NonExistentQueue", http.StatusBadRequest)

	if _, err := env.sim.SendRawMessage("one"); err != nil {
		t.Fatal(err)
	}
	a, err := env.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.url),
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "QueueArn", "MessageRetentionPeriod"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ApproximateNumberOfMessages": "1", "ApproximateNumberOfMessagesNotVisible": "0",
		"QueueArn": "arn:aws:sqs:us-east-1:123456789012:" + testQueue, "MessageRetentionPeriod": "345600"}
	for k, v := range want {
		if a.Attributes[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, a.Attributes[k], v)
		}
	}
	if len(a.Attributes) != len(want) {
		t.Errorf("attributes %v, want only %v", a.Attributes, want)
	}
	all, err := env.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.url), AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if err != nil || all.Attributes["VisibilityTimeout"] != "30" || len(all.Attributes) != len(queueAttributeNames) {
		t.Fatalf("All attributes: %v %v", all, err)
	}
	_, err = env.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.url), AttributeNames: []sqstypes.QueueAttributeName{"Bogus"}})
	apiErr(t, err, "InvalidAttributeName", http.StatusBadRequest)
	_, err = env.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.endpoint + "/123456789012/nope")})
	if !errors.As(err, &notFound) {
		t.Fatalf("unknown queue URL: %v", err)
	}
	_, err = env.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.endpoint + "/" + testQueue)})
	apiErr(t, err, "InvalidAddress", http.StatusBadRequest)

	// No queue configured: every name is unknown, the Go API says why.
	bare := newTestEnv(t, Config{})
	_, err = bare.sqsClient(1).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(testQueue)})
	if !errors.As(err, &notFound) {
		t.Fatalf("no queue configured: want QueueDoesNotExist, got %v", err)
	}
	if _, err := bare.sim.SendRawMessage("x"); !errors.Is(err, ErrNoInterruptionQueue) {
		t.Fatalf("SendRawMessage without queue: %v", err)
	}
	if _, err := New(Config{InterruptionQueue: "bad name!"}); err == nil || !strings.Contains(err.Error(), "InterruptionQueue") {
		t.Fatalf("invalid queue name accepted: %v", err)
	}
}

func TestSQSCreateQueueAndSetAttributes(t *testing.T) {
	env := newSQSEnv(t, Config{})
	ctx := context.Background()
	c, err := env.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("other"), Attributes: map[string]string{"VisibilityTimeout": "5"}})
	if err != nil || *c.QueueUrl != env.endpoint+"/123456789012/other" {
		t.Fatalf("CreateQueue: %v %v", c, err)
	}
	if _, err := env.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("other"), Attributes: map[string]string{"VisibilityTimeout": "5"}}); err != nil {
		t.Fatalf("CreateQueue with the same attributes is idempotent: %v", err)
	}
	_, err = env.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("other"), Attributes: map[string]string{"VisibilityTimeout": "6"}})
	var exists *sqstypes.QueueNameExists
	if !errors.As(err, &exists) {
		t.Fatalf("different attributes: want QueueNameExists, got %v", err)
	}
	_, err = env.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("x"), Attributes: map[string]string{"VisibilityTimeout": "99999"}})
	apiErr(t, err, "InvalidAttributeValue", http.StatusBadRequest)
	if _, err := env.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: c.QueueUrl, Attributes: map[string]string{"VisibilityTimeout": "7"}}); err != nil {
		t.Fatal(err)
	}
	a, err := env.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: c.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"VisibilityTimeout"}})
	if err != nil || a.Attributes["VisibilityTimeout"] != "7" {
		t.Fatalf("VisibilityTimeout after SetQueueAttributes: %v %v", a, err)
	}
}

// TestSQSLongPollReturnsEarly: a long poll answers as soon as a message
// arrives, without the clock moving; with no message it answers empty once
// WaitTimeSeconds have passed.
func TestSQSLongPollReturnsEarly(t *testing.T) {
	env := newSQSEnv(t, Config{})
	type result struct {
		msgs []sqstypes.Message
		err  error
	}
	// A failing test must not hang in the server's Close on a poll that
	// the fake clock never ends: cancel polls first (cleanups run last
	// registered first).
	pollCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	poll := func() chan result {
		ch := make(chan result, 1)
		go func() {
			out, err := env.sqs.ReceiveMessage(pollCtx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.url), WaitTimeSeconds: 20,
				MaxNumberOfMessages: 10, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"SentTimestamp", "ApproximateReceiveCount"}})
			if out == nil {
				out = &sqs.ReceiveMessageOutput{}
			}
			ch <- result{out.Messages, err}
		}()
		return ch
	}
	waitForPoll := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !env.clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("long poll never waited")
			}
			time.Sleep(time.Millisecond)
		}
	}

	ch := poll()
	waitForPoll()
	id, err := env.sim.SendRawMessage(`{"hello":"world"}`)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || len(r.msgs) != 1 || *r.msgs[0].MessageId != id || *r.msgs[0].Body != `{"hello":"world"}` {
			t.Fatalf("long poll got %+v, %v", r.msgs, r.err)
		}
		if got := r.msgs[0].Attributes["SentTimestamp"]; got != strconv.FormatInt(t0.UnixMilli(), 10) {
			t.Fatalf("SentTimestamp %s, want %d", got, t0.UnixMilli())
		}
		if r.msgs[0].Attributes["ApproximateReceiveCount"] != "1" {
			t.Fatalf("ApproximateReceiveCount %v", r.msgs[0].Attributes)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll did not return when a message arrived")
	}
	if !env.clk.Now().Equal(t0) {
		t.Fatal("clock moved")
	}

	// Control: nothing arrives, the poll ends after 20 simulated seconds.
	ch = poll()
	waitForPoll()
	env.clk.Step(19 * time.Second)
	select {
	case r := <-ch:
		t.Fatalf("long poll returned before WaitTimeSeconds: %+v %v", r.msgs, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	waitForPoll()
	env.clk.Step(time.Second)
	select {
	case r := <-ch:
		if r.err != nil || len(r.msgs) != 0 {
			t.Fatalf("empty long poll: %+v %v", r.msgs, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll did not end after WaitTimeSeconds")
	}
}

// TestSQSVisibilityTimeoutRedelivery: an undeleted message comes back after
// its visibility timeout with a new receipt handle; the old handle's delete
// succeeds without deleting; RedeliverInFlight forces a duplicate.
func TestSQSVisibilityTimeoutRedelivery(t *testing.T) {
	env := newSQSEnv(t, Config{})
	ctx := context.Background()
	id, _ := env.sim.SendRawMessage("m1")
	attrs := []sqstypes.MessageSystemAttributeName{"All"}
	first := env.receive(t, &sqs.ReceiveMessageInput{VisibilityTimeout: 10, MessageSystemAttributeNames: attrs})
	if len(first) != 1 || *first[0].MessageId != id {
		t.Fatalf("first receive: %+v", first)
	}
	if got := env.receive(t, &sqs.ReceiveMessageInput{}); len(got) != 0 {
		t.Fatalf("in-flight message delivered again: %+v", got)
	}
	if st := env.stats(t); st.InFlight != 1 || st.Visible != 0 {
		t.Fatalf("stats while in flight: %+v", st)
	}
	env.clk.Step(9 * time.Second)
	if got := env.receive(t, &sqs.ReceiveMessageInput{}); len(got) != 0 {
		t.Fatalf("delivered before the visibility timeout: %+v", got)
	}
	env.clk.Step(time.Second)
	second := env.receive(t, &sqs.ReceiveMessageInput{MessageSystemAttributeNames: attrs})
	if len(second) != 1 || *second[0].MessageId != id || second[0].Attributes["ApproximateReceiveCount"] != "2" ||
		*second[0].ReceiptHandle == *first[0].ReceiptHandle {
		t.Fatalf("re-delivery: %+v", second)
	}
	if second[0].Attributes["ApproximateFirstReceiveTimestamp"] != strconv.FormatInt(t0.UnixMilli(), 10) {
		t.Fatalf("ApproximateFirstReceiveTimestamp %v", second[0].Attributes)
	}
	// The stale handle: success, nothing deleted.
	if _, err := env.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(env.url), ReceiptHandle: first[0].ReceiptHandle}); err != nil {
		t.Fatalf("stale handle: %v", err)
	}
	if st := env.stats(t); st.Deleted != 0 || st.StaleDeletes != 1 || st.InFlight != 1 {
		t.Fatalf("after stale delete: %+v", st)
	}
	// A forced duplicate before the timeout.
	if n, err := env.sim.RedeliverInFlight(testQueue); err != nil || n != 1 {
		t.Fatalf("RedeliverInFlight = %d, %v", n, err)
	}
	third := env.receive(t, &sqs.ReceiveMessageInput{MessageSystemAttributeNames: attrs})
	if len(third) != 1 || *third[0].MessageId != id || third[0].Attributes["ApproximateReceiveCount"] != "3" {
		t.Fatalf("forced duplicate: %+v", third)
	}
	if _, err := env.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(env.url), ReceiptHandle: third[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	// Deleting again succeeds; a handle that is not one is refused.
	if _, err := env.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(env.url), ReceiptHandle: third[0].ReceiptHandle}); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	_, err := env.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(env.url), ReceiptHandle: aws.String("garbage")})
	var invalid *sqstypes.ReceiptHandleIsInvalid
	if !errors.As(err, &invalid) {
		t.Fatalf("garbage handle: want ReceiptHandleIsInvalid, got %v", err)
	}
	env.clk.Step(time.Hour)
	if got := env.receive(t, &sqs.ReceiveMessageInput{}); len(got) != 0 {
		t.Fatalf("deleted message delivered: %+v", got)
	}
	if st := env.stats(t); st.Sent != 1 || st.Received != 3 || st.Redelivered != 2 || st.Deleted != 1 || st.Visible+st.InFlight != 0 {
		t.Fatalf("final stats: %+v", st)
	}

	// ChangeMessageVisibility 0 makes a message receivable at once.
	env.sim.SendRawMessage("m2")
	got := env.receive(t, &sqs.ReceiveMessageInput{})
	if _, err := env.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(env.url), ReceiptHandle: got[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if again := env.receive(t, &sqs.ReceiveMessageInput{}); len(again) != 1 || *again[0].Body != "m2" {
		t.Fatalf("after ChangeMessageVisibility 0: %+v", again)
	}
}

func TestSQSRetention(t *testing.T) {
	env := newSQSEnv(t, Config{})
	env.sim.SendRawMessage("old")
	env.clk.Step(SQSDefaultRetention)
	if got := env.receive(t, &sqs.ReceiveMessageInput{}); len(got) != 0 {
		t.Fatalf("message past retention delivered: %+v", got)
	}
	if st := env.stats(t); st.Expired != 1 {
		t.Fatalf("stats %+v", st)
	}
	env.sim.SendRawMessage("new")
	code, body := httpDo(t, http.MethodGet, env.endpoint+"/metrics", "")
	for _, line := range []string{
		`ec2sim_sqs_messages{queue="` + testQueue + `",state="visible"} 1`,
		`ec2sim_sqs_messages_total{event="expired",queue="` + testQueue + `"} 1`,
		`ec2sim_sqs_messages_total{event="sent",queue="` + testQueue + `"} 2`,
	} {
		if code != 200 || !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

func TestSQSDeleteMessageBatchPartialFailure(t *testing.T) {
	env := newSQSEnv(t, Config{})
	ctx := context.Background()
	for _, b := range []string{"a", "b", "c"} {
		env.sim.SendRawMessage(b)
	}
	msgs := env.receive(t, &sqs.ReceiveMessageInput{MaxNumberOfMessages: 10})
	if len(msgs) != 3 {
		t.Fatalf("received %d", len(msgs))
	}
	out, err := env.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(env.url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("0"), ReceiptHandle: msgs[0].ReceiptHandle},
		{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-handle")},
		{Id: aws.String("2"), ReceiptHandle: msgs[2].ReceiptHandle},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 2 || len(out.Failed) != 1 || *out.Failed[0].Id != "bad" || *out.Failed[0].Code != "ReceiptHandleIsInvalid" || !out.Failed[0].SenderFault {
		t.Fatalf("batch result: %+v", out)
	}
	if st := env.stats(t); st.Deleted != 2 || st.InFlight != 1 {
		t.Fatalf("stats %+v", st)
	}
	entries := func(n int, ids ...string) []sqstypes.DeleteMessageBatchRequestEntry {
		out := []sqstypes.DeleteMessageBatchRequestEntry{}
		for i := range n {
			id := strconv.Itoa(i)
			if i < len(ids) {
				id = ids[i]
			}
			out = append(out, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(id), ReceiptHandle: msgs[1].ReceiptHandle})
		}
		return out
	}
	is := func(code string) func(error) bool {
		return func(err error) bool {
			var ae interface{ ErrorCode() string }
			return errors.As(err, &ae) && ae.ErrorCode() == code
		}
	}
	for _, c := range []struct {
		entries []sqstypes.DeleteMessageBatchRequestEntry
		want    func(error) bool
	}{
		{entries(0), func(err error) bool { var e *sqstypes.EmptyBatchRequest; return errors.As(err, &e) }},
		{entries(11), func(err error) bool { var e *sqstypes.TooManyEntriesInBatchRequest; return errors.As(err, &e) }},
		{entries(2, "x", "x"), func(err error) bool { var e *sqstypes.BatchEntryIdsNotDistinct; return errors.As(err, &e) }},
		{entries(1, "no spaces"), is("AWS.SimpleQueueService.InvalidBatchEntryId")},
	} {
		_, err := env.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(env.url), Entries: c.entries})
		if !c.want(err) {
			t.Errorf("%d entries: got %v", len(c.entries), err)
		}
	}
	if st := env.stats(t); st.InFlight != 1 {
		t.Fatalf("refused batches deleted something: %+v", st)
	}
}

func TestSQSReceiveValidation(t *testing.T) {
	env := newSQSEnv(t, Config{})
	ctx := context.Background()
	for _, in := range []*sqs.ReceiveMessageInput{
		{MaxNumberOfMessages: 11},
		{MaxNumberOfMessages: -1},
		{WaitTimeSeconds: 21},
		{VisibilityTimeout: 43201},
	} {
		in.QueueUrl = aws.String(env.url)
		_, err := env.sqs.ReceiveMessage(ctx, in)
		apiErr(t, err, "InvalidParameterValue", http.StatusBadRequest)
	}
	_, err := env.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.url), MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"Nope"}})
	apiErr(t, err, "InvalidAttributeName", http.StatusBadRequest)
	// Ten at most per call.
	for i := range 12 {
		env.sim.SendRawMessage("m" + strconv.Itoa(i))
	}
	if got := env.receive(t, &sqs.ReceiveMessageInput{MaxNumberOfMessages: 10}); len(got) != 10 {
		t.Fatalf("got %d, want 10", len(got))
	}
	if got := env.receive(t, &sqs.ReceiveMessageInput{}); len(got) != 1 {
		t.Fatalf("default MaxNumberOfMessages: got %d, want 1", len(got))
	}
}

// TestSQSRawMessages: bodies the interruption controller must survive
// arrive verbatim (the SDK checks their MD5); bodies SQS refuses are
// refused.
func TestSQSRawMessages(t *testing.T) {
	env := newSQSEnv(t, Config{})
	ctx := context.Background()
	bodies := []string{`{not json`, `{"version":"0","detail-type":"Something Else","source":"aws.s3","detail":{}}`, `[]`, "ünïcødé ✓"}
	for _, b := range bodies {
		if _, err := env.sim.SendRawMessage(b); err != nil {
			t.Fatalf("SendRawMessage(%q): %v", b, err)
		}
	}
	got := env.receive(t, &sqs.ReceiveMessageInput{MaxNumberOfMessages: 10})
	if len(got) != len(bodies) {
		t.Fatalf("got %d messages", len(got))
	}
	for i, m := range got {
		if *m.Body != bodies[i] {
			t.Errorf("body %d = %q, want %q", i, *m.Body, bodies[i])
		}
	}
	for _, b := range []string{"", "nul\x00byte", strings.Repeat("x", SQSMaxMessageSize+1)} {
		if _, err := env.sim.SendRawMessage(b); err == nil {
			t.Errorf("SendRawMessage accepted %.20q", b)
		}
	}
	_, err := env.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.url), MessageBody: aws.String("bell\x07")})
	var invalid *sqstypes.InvalidMessageContents
	if !errors.As(err, &invalid) {
		t.Fatalf("invalid character: want InvalidMessageContents, got %v", err)
	}
	out, err := env.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.url), MessageBody: aws.String("via SDK"), DelaySeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	if st := env.stats(t); st.Delayed != 1 {
		t.Fatalf("delayed message: %+v", st)
	}
	env.clk.Step(5 * time.Second)
	if got := env.receive(t, &sqs.ReceiveMessageInput{}); len(got) != 1 || *got[0].MessageId != *out.MessageId {
		t.Fatalf("delayed message after 5s: %+v", got)
	}
}

// TestSQSThrottlingAndFaultsSeenByRetryer: bucket throttling answers
// RequestThrottled, which the SDK's retryer retries; injected 5xx for a
// duration fail every attempt until the duration is over.
func TestSQSThrottlingAndFaultsSeenByRetryer(t *testing.T) {
	env := newSQSEnv(t, Config{Throttle: ThrottleConfig{Actions: map[string]Bucket{"ReceiveMessage": {Size: 1, RefillPerSecond: 1}}}})
	ctx := context.Background()
	in := &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.url)}
	if _, err := env.sqs.ReceiveMessage(ctx, in); err != nil {
		t.Fatal(err)
	}
	_, err := env.sqs.ReceiveMessage(ctx, in)
	var throttled *sqstypes.RequestThrottled
	if !errors.As(err, &throttled) {
		t.Fatalf("empty bucket: want RequestThrottled, got %v", err)
	}
	apiErr(t, err, "RequestThrottled", http.StatusBadRequest)
	// The retryer retries throttling (3 attempts), in vain while the clock stands still.
	_, err = env.sqsClient(3).ReceiveMessage(ctx, in)
	if !errors.As(err, &throttled) {
		t.Fatalf("retried throttling: %v", err)
	}
	if st := env.sim.Stats()["ReceiveMessage"]; st.Requests != 5 || st.Throttled != 4 {
		t.Fatalf("ReceiveMessage stats %+v, want 5 requests, 4 throttled", st)
	}
	env.clk.Step(time.Second)
	if _, err := env.sqs.ReceiveMessage(ctx, in); err != nil {
		t.Fatalf("after refill: %v", err)
	}

	// Every SQS action answers 503 for a minute.
	env.sim.SetThrottle(ThrottleConfig{Disabled: true})
	if err := env.sim.Faults().Add(FaultRule{Action: "sqs:*", Code: "ServiceUnavailable", For: metav1.Duration{Duration: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	before := env.sim.Stats()["DeleteMessage"].Requests
	_, err = env.sqsClient(3).DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(env.url), ReceiptHandle: aws.String("x")})
	apiErr(t, err, "ServiceUnavailable", http.StatusServiceUnavailable)
	if n := env.sim.Stats()["DeleteMessage"].Requests - before; n != 3 {
		t.Fatalf("retryer made %d attempts, want 3", n)
	}
	_, err = env.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.url)})
	apiErr(t, err, "ServiceUnavailable", http.StatusServiceUnavailable)
	if _, err := env.ec2.DescribeAvailabilityZones(ctx, nil); err != nil {
		t.Fatalf("sqs:* fault hit EC2: %v", err)
	}
	env.clk.Step(59 * time.Second)
	if _, err := env.sqs.ReceiveMessage(ctx, in); err == nil {
		t.Fatal("fault over before its minute")
	}
	env.clk.Step(time.Second)
	if _, err := env.sqs.ReceiveMessage(ctx, in); err != nil {
		t.Fatalf("fault not over after its minute: %v", err)
	}

	// One 500: the retryer's second attempt succeeds.
	env.sim.Faults().FailNext("ReceiveMessage", "InternalError", 1)
	before = env.sim.Stats()["ReceiveMessage"].Requests
	if _, err := env.sqsClient(3).ReceiveMessage(ctx, in); err != nil {
		t.Fatalf("retry after 500: %v", err)
	}
	if n := env.sim.Stats()["ReceiveMessage"].Requests - before; n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

var (
	fuzzSQSOnce sync.Once
	fuzzSQSSim  *Simulator
)

// FuzzSQS sends arbitrary JSON bodies to every SQS action: never a panic
// or a 500, every error an SQS JSON error (__type, X-Amzn-ErrorType),
// every success a JSON document. Long polls end with the request's
// 20 ms context.
func FuzzSQS(f *testing.F) {
	q := `"QueueUrl":"http://x/123456789012/q"`
	for _, seed := range []struct {
		action uint8
		body   string
	}{
		{0, `{"QueueName":"q"}`}, {1, `{` + q + `,"AttributeNames":["All"]}`}, {2, `{"QueueName":"new","Attributes":{"VisibilityTimeout":"5"}}`},
		{3, `{` + q + `,"Attributes":{"DelaySeconds":"901"}}`}, {4, `{` + q + `,"MessageBody":"{\"a\":1}"}`},
		{5, `{` + q + `,"MaxNumberOfMessages":10,"WaitTimeSeconds":1,"MessageSystemAttributeNames":["All"]}`},
		{6, `{` + q + `,"ReceiptHandle":"ZWMyc2ltLXJoOnEAYQBi"}`}, {7, `{` + q + `,"Entries":[{"Id":"a","ReceiptHandle":"x"}]}`},
		{8, `{` + q + `,"ReceiptHandle":"x","VisibilityTimeout":0}`}, {4, `{"QueueUrl":"::","MessageBody":""}`}, {5, `[]`}, {1, `null`},
	} {
		f.Add(seed.action, seed.body)
	}
	var names []string
	for _, a := range actionTable {
		if a.service == serviceSQS {
			names = append(names, a.name)
		}
	}
	f.Fuzz(func(t *testing.T, action uint8, body string) {
		fuzzSQSOnce.Do(func() {
			s, err := New(Config{ResponseDelay: -1, Throttle: ThrottleConfig{Disabled: true}, InterruptionQueue: "q"})
			if err != nil {
				t.Fatal(err)
			}
			fuzzSQSSim = s
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)).WithContext(ctx)
		req.Header.Set("X-Amz-Target", "AmazonSQS."+names[int(action)%len(names)])
		req.Header.Set("X-Amzn-Query-Mode", "true")
		rec := httptest.NewRecorder()
		fuzzSQSSim.Handler().ServeHTTP(rec, req)
		out := rec.Body.String()
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %.500s", rec.Code, body, out)
		}
		if rec.Code != http.StatusOK && (!strings.Contains(out, `"__type"`) || rec.Header().Get("X-Amzn-ErrorType") == "" || rec.Header().Get("x-amzn-query-error") == "") {
			t.Fatalf("status %d without an SQS JSON error for %q: %.500s", rec.Code, body, out)
		}
		if rec.Code == http.StatusOK && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("200 with invalid JSON for %q: %.500s", body, out)
		}
	})
}
