package ec2sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpx/karpx/catalog/awsquota"
)

func TestFaultsFromGoAndAdminEndpoint(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	env.launchTemplate(t, "faults", env.al2023(t, "x86_64"), "")

	// Admin endpoint: the next CreateFleet fails with InternalError (500).
	code, body := httpDo(t, http.MethodPost, env.endpoint+"/_sim/faults",
		`{"rules":[{"action":"CreateFleet","code":"InternalError","count":1}],"capacity":[{"instanceType":"m5.large","zone":"us-east-1a","capacityType":"on-demand","count":1}]}`)
	if code != http.StatusOK {
		t.Fatalf("POST /_sim/faults: %d %s", code, body)
	}
	var fs FaultSet
	if err := json.Unmarshal(body, &fs); err != nil || len(fs.Rules) != 1 || len(fs.Capacity) != 1 {
		t.Fatalf("fault set %s: %v", body, err)
	}
	in := fleetInput("faults", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a"))
	_, err := env.ec2.CreateFleet(ctx, in)
	apiErr(t, err, "InternalError", 500)
	// The capacity fault is used up by one launch attempt.
	out, err := env.ec2.CreateFleet(ctx, in)
	if err != nil || len(out.Instances) != 0 || *out.Errors[0].ErrorCode != "InsufficientInstanceCapacity" {
		t.Fatalf("capacity fault: %v %+v", err, out)
	}
	out, err = env.ec2.CreateFleet(ctx, in)
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("after faults: %v %+v", err, out)
	}
	if code, body := httpDo(t, http.MethodGet, env.endpoint+"/_sim/faults", ""); code != 200 || !strings.Contains(string(body), `"rules": []`) {
		t.Fatalf("faults left: %s", body)
	}
	if code, body := httpDo(t, http.MethodPost, env.endpoint+"/_sim/faults", `{"rules":[{"action":"Nope","code":"InternalError"}]}`); code != 400 {
		t.Fatalf("bad rule accepted: %d %s", code, body)
	}

	// Go API: Unavailable (503) twice; the retryer gets through on the third attempt.
	if err := env.sim.Faults().FailNext("DescribeSubnets", "Unavailable", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := env.ec2Client(3).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("retryer did not absorb Unavailable: %v", err)
	}
	if st := env.sim.Stats()["DescribeSubnets"]; st.Requests != 3 || st.Errors != 2 || st.Throttled != 0 {
		t.Fatalf("DescribeSubnets stats %+v", st)
	}
	// Injected throttling looks like the real thing to the SDK.
	_ = env.sim.Faults().FailNext("GetParameter", "ThrottlingException", 1)
	_, err = env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.35/x86_64/latest/image_id")})
	apiErr(t, err, "ThrottlingException", 400)

	// Probability 1 with no count applies until cleared.
	_ = env.sim.Faults().Add(FaultRule{Action: "DescribeImages", Code: "RequestLimitExceeded", Probability: 1})
	for range 3 {
		_, err := env.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
		apiErr(t, err, "RequestLimitExceeded", 503)
	}
	env.sim.Faults().Clear()
	if _, err := env.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{}); err != nil {
		t.Fatal(err)
	}

	// Latency.
	_ = env.sim.Faults().AddLatency("DescribeAvailabilityZones", 150*time.Millisecond)
	start := time.Now()
	if _, err := env.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("latency %v", d)
	}
	if code, _ := httpDo(t, http.MethodDelete, env.endpoint+"/_sim/faults", ""); code != 200 || len(env.sim.Faults().Get().Rules) != 0 {
		t.Fatal("DELETE /_sim/faults did not clear")
	}
}

func TestProbabilisticFaultsAreSeeded(t *testing.T) {
	run := func() []bool {
		f := newFaults(7)
		_ = f.Add(FaultRule{Action: "CreateFleet", Code: "InternalError", Probability: 0.5})
		var out []bool
		for range 200 {
			_, e := f.evaluate("CreateFleet")
			out = append(out, e != nil)
		}
		return out
	}
	a, b := run(), run()
	hits := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different faults")
		}
		if a[i] {
			hits++
		}
	}
	if hits < 70 || hits > 130 {
		t.Fatalf("probability 0.5 hit %d of 200", hits)
	}
}

func TestAdminCountsInstancesAndMetrics(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	env.launchTemplate(t, "admin", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(ctx, fleetInput("admin", types.DefaultTargetCapacityTypeSpot, 2, map[string]string{"k": "v"}, ov("m5.large", "us-east-1a")))
	if err != nil || len(out.Instances) != 1 {
		t.Fatal(err)
	}
	env.sim.SetThrottle(ThrottleConfig{Categories: map[ThrottleCategory]Bucket{awsquota.NonMutating: {Size: 1, RefillPerSecond: 0.001}}})
	_, _ = env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})
	_, _ = env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})

	code, body := httpDo(t, http.MethodGet, env.endpoint+"/_sim/counts", "")
	var counts map[string]ActionStats
	if err := json.Unmarshal(body, &counts); code != 200 || err != nil {
		t.Fatalf("counts: %d %v", code, err)
	}
	if counts["CreateFleet"].Requests != 1 || counts["DescribeInstances"] != (ActionStats{Requests: 2, Throttled: 1, Errors: 1}) {
		t.Fatalf("counts %+v", counts)
	}
	code, body = httpDo(t, http.MethodGet, env.endpoint+"/_sim/instances", "")
	var insts []Instance
	if err := json.Unmarshal(body, &insts); code != 200 || err != nil || len(insts) != 2 {
		t.Fatalf("instances: %d %v %s", code, err, body)
	}
	if i := insts[0]; i.InstanceType != "m5.large" || i.Zone != "us-east-1a" || i.CapacityType != "spot" || i.Tags["k"] != "v" || i.LaunchTime.IsZero() || i.State == "" {
		t.Fatalf("instance %+v", i)
	}
	code, body = httpDo(t, http.MethodGet, env.endpoint+"/metrics", "")
	for _, want := range []string{
		`ec2sim_api_requests_total{action="CreateFleet",service="ec2"} 1`,
		`ec2sim_api_throttled_total{action="DescribeInstances",service="ec2"} 1`,
		`ec2sim_api_errors_total{action="DescribeInstances",code="RequestLimitExceeded",service="ec2"} 1`,
		`ec2sim_instances_launched_total{capacity_type="spot",instance_type="m5.large",zone="us-east-1a"} 2`,
		`ec2sim_instances{capacity_type="spot",state=`,
	} {
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _ := httpDo(t, http.MethodDelete, env.endpoint+"/_sim/counts", ""); code != http.StatusNoContent || len(env.sim.Counts()) != 0 {
		t.Fatal("DELETE /_sim/counts did not reset")
	}
	if code, body := httpDo(t, http.MethodPut, env.endpoint+"/_sim/throttle", `{"disabled":true}`); code != 200 || !strings.Contains(string(body), `"disabled": true`) {
		t.Fatalf("PUT /_sim/throttle: %d %s", code, body)
	}
	if _, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds}); err != nil {
		t.Fatal(err)
	}
}

// TestFaultRuleCountsOnlyCallsItAnswers: a rule's Count is consumed by the
// calls it gives its error or latency to, not by calls whose error an
// earlier rule supplied.
func TestFaultRuleCountsOnlyCallsItAnswers(t *testing.T) {
	f := newFaults(1)
	if err := f.Add(
		FaultRule{Action: "DescribeInstances", Code: "RequestLimitExceeded", Count: 1},
		FaultRule{Action: "*", Code: "UnauthorizedOperation", Count: 1},
	); err != nil {
		t.Fatal(err)
	}
	_, e := f.evaluate("DescribeInstances")
	if e == nil || e.Code != "RequestLimitExceeded" {
		t.Fatalf("call 1: %v, want rule 1's RequestLimitExceeded", e)
	}
	if rules := f.Get().Rules; len(rules) != 1 || rules[0].Code != "UnauthorizedOperation" || rules[0].Count != 1 {
		t.Fatalf("after call 1: rules %+v, want rule 2 alone with its count of 1", rules)
	}
	_, e = f.evaluate("DescribeInstances")
	if e == nil || e.Code != "UnauthorizedOperation" {
		t.Fatalf("call 2: %v, want rule 2's UnauthorizedOperation", e)
	}
	if _, e = f.evaluate("DescribeInstances"); e != nil {
		t.Fatalf("call 3: %v, want no fault: both rules are used up", e)
	}

	// A rule with a latency applies for it even when another rule's error
	// answers the call; its count goes.
	if err := f.Add(
		FaultRule{Action: "CreateFleet", Code: "InternalError", Count: 2},
		FaultRule{Action: "CreateFleet", Code: "Unavailable", Latency: metav1.Duration{Duration: time.Second}, Count: 1},
	); err != nil {
		t.Fatal(err)
	}
	d, e := f.evaluate("CreateFleet")
	if e == nil || e.Code != "InternalError" || d != time.Second {
		t.Fatalf("CreateFleet call 1: %v after %v, want InternalError after 1s", e, d)
	}
	d, e = f.evaluate("CreateFleet")
	if e == nil || e.Code != "InternalError" || d != 0 {
		t.Fatalf("CreateFleet call 2: %v after %v, want InternalError without latency", e, d)
	}
	if rules := f.Get().Rules; len(rules) != 0 {
		t.Fatalf("rules left %+v", rules)
	}
}
