package ec2sim

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestHoldAnswers: a held CreateFleet has launched before its answer is
// released, is announced with its instance and caller, and the caller gets
// the answer only after ReleaseHeld; Calls records it with its
// User-Agent's app id.
func TestHoldAnswers(t *testing.T) {
	env := newTestEnv(t, Config{})
	ami := env.al2023(t, "x86_64")
	env.launchTemplate(t, "hold", ami, "")
	env.sim.HoldAnswers("CreateFleet", 1)
	client := env.ec2Client(1, func(o *ec2.Options) { o.AppID = "replica-a" })
	type answer struct {
		out *ec2.CreateFleetOutput
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := client.CreateFleet(context.Background(), fleetInput("hold", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
		done <- answer{out, err}
	}()
	var held HeldCall
	select {
	case held = <-env.sim.Held():
	case <-time.After(10 * time.Second):
		t.Fatal("no held CreateFleet announced")
	}
	if len(held.InstanceIDs) != 1 || !strings.Contains(held.UserAgent, "app/replica-a") {
		t.Fatalf("held call %+v: want one instance and the caller's app id", held)
	}
	if in := env.sim.Instances(); len(in) != 1 || in[0].ID != held.InstanceIDs[0] {
		t.Fatalf("instances %+v: the held call must have launched %s", in, held.InstanceIDs[0])
	}
	select {
	case a := <-done:
		t.Fatalf("answered before ReleaseHeld: %+v", a)
	case <-time.After(200 * time.Millisecond):
	}
	env.sim.ReleaseHeld()
	a := <-done
	if a.err != nil || aws.ToString(&a.out.Instances[0].InstanceIds[0]) != held.InstanceIDs[0] {
		t.Fatalf("released answer %+v, %v", a.out, a.err)
	}
	// Only n answers are held.
	if _, err := client.CreateFleet(context.Background(), fleetInput("hold", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", ""))); err != nil {
		t.Fatal(err)
	}
	calls := env.sim.Calls("CreateFleet")
	if len(calls) != 2 || !strings.Contains(calls[0].UserAgent, "app/replica-a") || calls[0].End.Sub(calls[0].Start) < 200*time.Millisecond {
		t.Errorf("calls %+v: want 2, the first held at least 200ms", calls)
	}
}

// TestCallsRecordFleetOverrides: Calls keeps every override a CreateFleet
// asked for, as sent, including those EC2 refuses (an unknown type).
func TestCallsRecordFleetOverrides(t *testing.T) {
	env := newTestEnv(t, Config{})
	env.launchTemplate(t, "rec", env.al2023(t, "x86_64"), "")
	in := fleetInput("rec", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1b"), ov("c5.large", ""), ov("m5.huge", ""))
	if _, err := env.ec2.CreateFleet(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	calls := env.sim.Calls("CreateFleet")
	want := []FleetOverride{{InstanceType: "m5.large", AvailabilityZone: "us-east-1b"}, {InstanceType: "c5.large"}, {InstanceType: "m5.huge"}}
	if len(calls) != 1 || !reflect.DeepEqual(calls[0].Overrides, want) {
		t.Fatalf("calls %+v: want one with overrides %+v", calls, want)
	}
}

// TestHoldAdmin: the same through the admin endpoints, as a test in
// another process drives a standalone ec2sim.
func TestHoldAdmin(t *testing.T) {
	env := newTestEnv(t, Config{})
	ami := env.al2023(t, "x86_64")
	env.launchTemplate(t, "hold", ami, "")
	if code, body := httpDo(t, http.MethodPost, env.endpoint+"/_sim/hold", `{"action":"DescribeImages","count":1}`); code != http.StatusBadRequest {
		t.Errorf("holding DescribeImages: %d %s, want 400", code, body)
	}
	if code, body := httpDo(t, http.MethodPost, env.endpoint+"/_sim/hold", `{"action":"CreateFleet","count":1}`); code != http.StatusNoContent {
		t.Fatalf("POST /_sim/hold: %d %s", code, body)
	}
	done := make(chan error, 1)
	go func() {
		_, err := env.ec2.CreateFleet(context.Background(), fleetInput("hold", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
		done <- err
	}()
	code, body := httpDo(t, http.MethodGet, env.endpoint+"/_sim/hold", "")
	var held HeldCall
	if err := json.Unmarshal(body, &held); code != http.StatusOK || err != nil || len(held.InstanceIDs) != 1 {
		t.Fatalf("GET /_sim/hold: %d %s (%v), want the held call", code, body, err)
	}
	if code, _ := httpDo(t, http.MethodDelete, env.endpoint+"/_sim/hold", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE /_sim/hold: %d", code)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var calls []Call
	_, body = httpDo(t, http.MethodGet, env.endpoint+"/_sim/calls?action=CreateFleet", "")
	if err := json.Unmarshal(body, &calls); err != nil || len(calls) != 1 || calls[0].End.IsZero() {
		t.Errorf("GET /_sim/calls: %s (%v), want one finished call", body, err)
	}
}
