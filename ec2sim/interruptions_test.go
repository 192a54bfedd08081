package ec2sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// drain receives and deletes every visible message through the SDK and
// returns the decoded events.
func drain(t *testing.T, client *sqs.Client, url string) []Event {
	t.Helper()
	ctx := context.Background()
	var out []Event
	for {
		r, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		if len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			var ev Event
			if err := json.Unmarshal([]byte(*m.Body), &ev); err != nil {
				t.Fatalf("message body is not an event: %v: %s", err, *m.Body)
			}
			out = append(out, ev)
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// stateChanges returns "<instance>=<state>@<time>" per state-change event.
func stateChanges(t *testing.T, events []Event) []string {
	t.Helper()
	var out []string
	for _, ev := range events {
		if ev.DetailType != DetailTypeStateChange {
			continue
		}
		var d StateChangeDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			t.Fatal(err)
		}
		if ev.Resources[0] != "arn:aws:ec2:us-east-1:123456789012:instance/"+d.InstanceID {
			t.Errorf("resources %v for %s", ev.Resources, d.InstanceID)
		}
		out = append(out, d.InstanceID+"="+d.State+"@"+ev.Time)
	}
	return out
}

func evTime(t time.Time) string { return t.UTC().Format(eventTimeFormat) }

func (e *testEnv) state(t *testing.T, id string) types.Instance {
	t.Helper()
	d, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	return d.Reservations[0].Instances[0]
}

// TestSpotInterruptionReclaimsAfterNotice: the warning arrives at once, the
// instance runs until the (shortened) notice is over, then shuts down with
// Server.SpotInstanceTermination, its Node goes, and the state changes
// follow; on-demand instances cannot get the warning.
func TestSpotInterruptionReclaimsAfterNotice(t *testing.T) {
	env := newKubeEnv(t, Config{InterruptionQueue: testQueue, SpotInterruptionNotice: 10 * time.Second})
	client := env.sqsClient(1)
	url := env.endpoint + "/123456789012/" + testQueue
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), "")
	spot := env.launch(t, "nodes", "m5.large", nil)
	od, err := env.ec2.CreateFleet(context.Background(), fleetInput("nodes", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	odID := od.Instances[0].InstanceIds[0]
	env.advance(t, 3100*time.Millisecond)
	name := *spot.PrivateDnsName
	if _, ok := env.node(t, name); !ok {
		t.Fatal("node did not join")
	}
	launched := drain(t, client, url)
	if got := stateChanges(t, launched); len(got) != 4 {
		t.Fatalf("launch state changes %v, want pending and running of 2 instances", got)
	}

	if _, err := env.sim.Interrupt(InterruptionSpot, *spot.InstanceId, odID); !errors.Is(err, ErrNotSpot) {
		t.Fatalf("on-demand instance: want ErrNotSpot, got %v", err)
	}
	if _, err := env.sim.Interrupt(InterruptionSpot, "i-0123456789abcdef0"); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("unknown instance: want ErrUnknownInstance, got %v", err)
	}
	if got := drain(t, client, url); len(got) != 0 {
		t.Fatalf("refused interruptions sent %v", got)
	}

	warnedAt := env.clk.Now()
	sent, err := env.sim.Interrupt(InterruptionSpot, *spot.InstanceId)
	if err != nil || len(sent) != 1 {
		t.Fatalf("Interrupt: %v %v", sent, err)
	}
	got := drain(t, client, url)
	if len(got) != 1 || got[0].ID != sent[0].ID {
		t.Fatalf("queue has %+v, want the warning", got)
	}
	ev := got[0]
	var d SpotInterruptionDetail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if ev.DetailType != "EC2 Spot Instance Interruption Warning" || ev.Source != "aws.ec2" || ev.Version != "0" || ev.Account != "123456789012" ||
		ev.Region != "us-east-1" || len(ev.Resources) != 1 || ev.Resources[0] != "arn:aws:ec2:us-east-1:123456789012:instance/"+*spot.InstanceId ||
		d.InstanceID != *spot.InstanceId || d.InstanceAction != "terminate" {
		t.Fatalf("warning %+v detail %+v", ev, d)
	}
	snap := env.sim.Instances()[0]
	if snap.SpotReclaimTime == nil {
		t.Fatal("no reclaim time")
	}
	reclaim := *snap.SpotReclaimTime
	if notice := reclaim.Sub(warnedAt); notice < 10*time.Second || notice >= 11*time.Second {
		t.Fatalf("notice %v, want 10s rounded up to a second", notice)
	}
	evAt, err := time.Parse(time.RFC3339, ev.Time)
	if err != nil || !evAt.Add(2*time.Minute).Equal(reclaim) {
		t.Fatalf("event time %s + 2m != reclaim %s", ev.Time, reclaim)
	}

	env.advance(t, reclaim.Sub(env.clk.Now())-time.Millisecond)
	if st := env.state(t, *spot.InstanceId); st.State.Name != types.InstanceStateNameRunning {
		t.Fatalf("state before reclaim: %s", st.State.Name)
	}
	if _, ok := env.node(t, name); !ok {
		t.Fatal("node gone before reclaim")
	}
	env.advance(t, time.Millisecond)
	st := env.state(t, *spot.InstanceId)
	if st.State.Name != types.InstanceStateNameShuttingDown || st.StateReason == nil || *st.StateReason.Code != "Server.SpotInstanceTermination" {
		t.Fatalf("at reclaim: state %s reason %+v", st.State.Name, st.StateReason)
	}
	env.advance(t, 10*time.Millisecond) // the kubelet pass after shutdown began
	if _, ok := env.node(t, name); ok {
		t.Fatal("node survived the reclaim")
	}
	if _, err := env.sim.Interrupt(InterruptionSpot, *spot.InstanceId); !errors.Is(err, ErrInstanceEnded) {
		t.Fatalf("second interruption of a reclaimed instance: %v", err)
	}
	env.advance(t, time.Second) // ShuttingDownDelay
	if st := env.state(t, *spot.InstanceId); st.State.Name != types.InstanceStateNameTerminated || *st.StateReason.Code != "Server.SpotInstanceTermination" {
		t.Fatalf("after shutdown: %s %+v", st.State.Name, st.StateReason)
	}
	want := []string{*spot.InstanceId + "=shutting-down@" + evTime(reclaim), *spot.InstanceId + "=terminated@" + evTime(reclaim.Add(time.Second))}
	if got := stateChanges(t, drain(t, client, url)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("state changes %v, want %v", got, want)
	}
	if st := env.state(t, odID); st.State.Name != types.InstanceStateNameRunning {
		t.Fatalf("on-demand instance %s", st.State.Name)
	}
}

// TestStateChangeEventsOnTerminate: every transition of a launched and
// terminated instance is sent once, in order, with its own time; none is
// sent without a queue.
func TestStateChangeEventsOnTerminate(t *testing.T) {
	env := newSQSEnv(t, Config{PendingDelay: 1500 * time.Millisecond, ShuttingDownDelay: 2 * time.Second})
	ctx := context.Background()
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(ctx, fleetInput("nodes", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	id := out.Instances[0].InstanceIds[0]
	env.clk.Step(2 * time.Second)
	if got := stateChanges(t, drain(t, env.sqs, env.url)); strings.Join(got, " ") != id+"=pending@"+evTime(t0)+" "+id+"=running@"+evTime(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("launch: %v", got)
	}
	if _, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	// Terminating twice changes nothing and sends nothing more.
	if _, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if got := stateChanges(t, drain(t, env.sqs, env.url)); strings.Join(got, " ") != id+"=shutting-down@"+evTime(t0.Add(2*time.Second)) {
		t.Fatalf("terminate: %v", got)
	}
	env.clk.Step(2 * time.Second)
	if got := stateChanges(t, drain(t, env.sqs, env.url)); strings.Join(got, " ") != id+"=terminated@"+evTime(t0.Add(4*time.Second)) {
		t.Fatalf("terminated: %v", got)
	}
	if st := env.state(t, id); *st.StateReason.Code != "Client.UserInitiatedShutdown" {
		t.Fatalf("reason %+v", st.StateReason)
	}
	env.clk.Step(time.Hour)
	if got := drain(t, env.sqs, env.url); len(got) != 0 {
		t.Fatalf("extra events %v", got)
	}

	// Control: no queue, no events, no error.
	bare := newTestEnv(t, Config{})
	bare.launchTemplate(t, "nodes", bare.al2023(t, "x86_64"), "")
	if _, err := bare.ec2.CreateFleet(ctx, fleetInput("nodes", types.DefaultTargetCapacityTypeSpot, 1, nil, ov("m5.large", "us-east-1a"))); err != nil {
		t.Fatal(err)
	}
	if len(bare.sim.Queues()) != 0 {
		t.Fatal("queue without Config.InterruptionQueue")
	}
	evs, err := bare.sim.Interrupt(InterruptionSpot, bare.sim.Instances()[0].ID)
	if err != nil || len(evs) != 1 || bare.sim.Instances()[0].SpotReclaimTime == nil {
		t.Fatalf("spot interruption without a queue still reclaims: %v %v", evs, err)
	}
}

// TestInterruptionEventShapes checks the JSON keys and values AWS documents
// for each event kind.
func TestInterruptionEventShapes(t *testing.T) {
	env := newSQSEnv(t, Config{ScheduledChangeLead: 48 * time.Hour})
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(context.Background(), fleetInput("nodes", types.DefaultTargetCapacityTypeSpot, 2, nil, ov("m5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	ids := out.Instances[0].InstanceIds
	od, _ := env.ec2.CreateFleet(context.Background(), fleetInput("nodes", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a")))
	odID := od.Instances[0].InstanceIds[0]
	env.clk.Step(time.Second)
	drain(t, env.sqs, env.url)

	if _, err := env.sim.Interrupt(InterruptionRebalance, odID); !errors.Is(err, ErrNotSpot) {
		t.Fatalf("rebalance of on-demand: %v", err)
	}
	if _, err := env.sim.Interrupt("reboot", ids[0]); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, err := env.sim.Interrupt(InterruptionRetirement); err == nil {
		t.Fatal("no ids accepted")
	}

	raw := func(kind InterruptionKind, ids ...string) []map[string]any {
		t.Helper()
		if _, err := env.sim.Interrupt(kind, ids...); err != nil {
			t.Fatal(err)
		}
		msgs := env.receive(t, &sqs.ReceiveMessageInput{MaxNumberOfMessages: 10})
		var out []map[string]any
		for _, m := range msgs {
			var v map[string]any
			if err := json.Unmarshal([]byte(*m.Body), &v); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"} {
				if _, ok := v[k]; !ok {
					t.Errorf("%s event lacks %q: %s", kind, k, *m.Body)
				}
			}
			out = append(out, v)
			env.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(env.url), ReceiptHandle: m.ReceiptHandle})
		}
		return out
	}
	reb := raw(InterruptionRebalance, ids...)
	if len(reb) != 2 || reb[0]["detail-type"] != "EC2 Instance Rebalance Recommendation" || reb[0]["detail"].(map[string]any)["instance-id"] != ids[0] ||
		reb[0]["time"] != evTime(env.clk.Now()) {
		t.Fatalf("rebalance %v", reb)
	}
	for _, c := range []struct {
		kind InterruptionKind
		code string
	}{{InterruptionRetirement, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}, {InterruptionMaintenance, "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED"}} {
		h := raw(c.kind, ids[0], odID)
		if len(h) != 1 || h[0]["detail-type"] != "AWS Health Event" || h[0]["source"] != "aws.health" {
			t.Fatalf("%s: %v", c.kind, h)
		}
		d := h[0]["detail"].(map[string]any)
		if d["service"] != "EC2" || d["eventTypeCategory"] != "scheduledChange" || d["eventTypeCode"] != c.code ||
			!strings.HasPrefix(d["eventArn"].(string), "arn:aws:health:us-east-1::event/EC2/"+c.code+"/") {
			t.Fatalf("%s detail %v", c.kind, d)
		}
		ents := d["affectedEntities"].([]any)
		if len(ents) != 2 || ents[0].(map[string]any)["entityValue"] != ids[0] || ents[1].(map[string]any)["entityValue"] != odID {
			t.Fatalf("affectedEntities %v", ents)
		}
		start, err := time.Parse(time.RFC1123, d["startTime"].(string))
		if err != nil || !start.Equal(env.clk.Now().Add(48*time.Hour).Truncate(time.Second)) {
			t.Fatalf("startTime %v (%v), want 48h ahead", d["startTime"], err)
		}
	}
	st := raw(InterruptionStopping, ids[1])
	if len(st) != 1 || st[0]["detail"].(map[string]any)["state"] != "stopping" {
		t.Fatalf("stopping %v", st)
	}
	if got := env.state(t, ids[1]); got.State.Name != types.InstanceStateNameRunning {
		t.Fatalf("a stopping notification changed the instance: %s", got.State.Name)
	}
}

// TestSimInterruptAndQueueEndpoints drives the _sim endpoints.
func TestSimInterruptAndQueueEndpoints(t *testing.T) {
	env := newSQSEnv(t, Config{SpotInterruptionNotice: 30 * time.Second})
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(context.Background(), fleetInput("nodes", types.DefaultTargetCapacityTypeSpot, 1, nil, ov("m5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	id := out.Instances[0].InstanceIds[0]
	base := env.endpoint + "/_sim/"
	code, body := httpDo(t, http.MethodPost, base+"interrupt", `{"kind":"spot-interruption","instanceIds":["`+id+`"]}`)
	var resp struct{ Events []Event }
	if code != 200 || json.Unmarshal(body, &resp) != nil || len(resp.Events) != 1 || resp.Events[0].DetailType != DetailTypeSpotInterruption {
		t.Fatalf("interrupt: %d %s", code, body)
	}
	if code, body := httpDo(t, http.MethodPost, base+"interrupt", `{"kind":"spot-interruption","instanceIds":["i-0000000000000000f"]}`); code != 404 {
		t.Fatalf("unknown instance: %d %s", code, body)
	}
	if code, body := httpDo(t, http.MethodPost, base+"interrupt", `{"kind":"nope","instanceIds":["`+id+`"]}`); code != 400 || !strings.Contains(string(body), "unknown interruption kind") {
		t.Fatalf("unknown kind: %d %s", code, body)
	}
	if code, body := httpDo(t, http.MethodPost, base+"sqs/"+testQueue+"/messages", `{"malformed`); code != 200 || !strings.Contains(string(body), "messageId") {
		t.Fatalf("raw message: %d %s", code, body)
	}
	if code, _ := httpDo(t, http.MethodPost, base+"sqs/"+testQueue+"/messages", ""); code != 400 {
		t.Fatalf("empty body: %d", code)
	}
	if code, _ := httpDo(t, http.MethodPost, base+"sqs/nope/messages", "x"); code != 404 {
		t.Fatalf("unknown queue: %d", code)
	}
	msgs := env.receive(t, &sqs.ReceiveMessageInput{MaxNumberOfMessages: 10})
	if len(msgs) != 3 { // pending, spot warning, raw; running comes later
		t.Fatalf("received %d", len(msgs))
	}
	code, body = httpDo(t, http.MethodGet, base+"sqs/"+testQueue, "")
	var st QueueStats
	if code != 200 || json.Unmarshal(body, &st) != nil || st.InFlight != 3 || st.Received != 3 || st.URL != "/123456789012/"+testQueue {
		t.Fatalf("stats: %d %s", code, body)
	}
	code, body = httpDo(t, http.MethodPost, base+"sqs/"+testQueue+"/redeliver", "")
	if code != 200 || !strings.Contains(string(body), `"redelivered": 3`) {
		t.Fatalf("redeliver: %d %s", code, body)
	}
	code, body = httpDo(t, http.MethodGet, base+"sqs/"+testQueue+"/messages", "")
	var list []QueueMessage
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list) != 3 || list[2].Body != `{"malformed` || list[2].InFlight {
		t.Fatalf("messages: %d %s", code, body)
	}
	if code, _ := httpDo(t, http.MethodGet, base+"sqs/nope", ""); code != 404 {
		t.Fatalf("unknown queue stats: %d", code)
	}
	code, body = httpDo(t, http.MethodGet, base+"sqs", "")
	if code != 200 || !strings.Contains(string(body), testQueue) {
		t.Fatalf("list: %d %s", code, body)
	}
	// The fault endpoint takes SQS rules with a duration.
	if code, body := httpDo(t, http.MethodPost, base+"faults", `{"rules":[{"action":"sqs:*","code":"RequestThrottled","for":"30s"}]}`); code != 200 || !strings.Contains(string(body), "until") {
		t.Fatalf("faults: %d %s", code, body)
	}
	_, err = env.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.url)})
	var throttled *sqstypes.RequestThrottled
	if !errors.As(err, &throttled) {
		t.Fatalf("injected throttling: %v", err)
	}
}

// TestRunDeliversEventsToLongPolls: with the real clock and Run, a long
// poll is woken by the state changes Run notices (here a spot reclaim a
// second after the warning) instead of waiting out WaitTimeSeconds.
func TestRunDeliversEventsToLongPolls(t *testing.T) {
	env := newTestEnv(t, Config{InterruptionQueue: testQueue, ReconcileInterval: 20 * time.Millisecond, PendingDelay: 50 * time.Millisecond,
		ShuttingDownDelay: 100 * time.Millisecond, SpotInterruptionNotice: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go env.sim.Run(ctx)
	client := env.sqsClient(1)
	url := env.endpoint + "/123456789012/" + testQueue
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(ctx, fleetInput("nodes", types.DefaultTargetCapacityTypeSpot, 1, nil, ov("m5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	id := out.Instances[0].InstanceIds[0]
	start := time.Now()
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != "terminated" {
		r, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 20})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			t.Fatalf("a long poll waited out its 20 s; seen %v", seen)
		}
		for _, m := range r.Messages {
			var ev Event
			if err := json.Unmarshal([]byte(*m.Body), &ev); err != nil {
				t.Fatal(err)
			}
			switch ev.DetailType {
			case DetailTypeStateChange:
				var d StateChangeDetail
				_ = json.Unmarshal(ev.Detail, &d)
				seen = append(seen, d.State)
				if d.State == StateRunning {
					if _, err := env.sim.Interrupt(InterruptionSpot, id); err != nil {
						t.Fatal(err)
					}
				}
			case DetailTypeSpotInterruption:
				seen = append(seen, "warning")
			}
			client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if got := strings.Join(seen, " "); got != "pending running warning shutting-down terminated" {
		t.Fatalf("events %q", got)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("took %v: long polls were not woken", el)
	}
}
