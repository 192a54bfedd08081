package status

import (
	"bytes"
	"testing"
	"time"

	awsinstancestatus "github.com/karpx/karpx/autoscaler/aws/providers/instancestatus/statusreport"
)

// TestPrintInstanceReport: an instance within its toleration says when it
// is replaced, one acted on says so, a failed poll is reported, and an
// empty report prints nothing.
func TestPrintInstanceReport(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rep := &awsinstancestatus.Report{Polled: now.Add(-10 * time.Second), Instances: []awsinstancestatus.ReportedInstance{
		{HealthStatus: awsinstancestatus.HealthStatus{InstanceID: "i-1", Details: []awsinstancestatus.Detail{
			{Category: awsinstancestatus.InstanceStatus, Name: "reachability", ImpairedSince: now.Add(-75 * time.Second)}}},
			NodeClaim: "solo-abc", NodePool: "solo", Node: "ip-10-0-0-1.ec2.internal", DueAt: now.Add(45 * time.Second)},
		{HealthStatus: awsinstancestatus.HealthStatus{InstanceID: "i-2", Details: []awsinstancestatus.Detail{
			{Category: awsinstancestatus.SystemStatus, Name: "reachability", ImpairedSince: now.Add(-3 * time.Minute)},
			{Category: awsinstancestatus.EventStatus, Name: "instance-retirement", ImpairedSince: now}}},
			NodeClaim: "pair-def", NodePool: "pair", DueAt: now.Add(-time.Minute), Acted: true},
	}}
	var out bytes.Buffer
	printInstanceReport(&out, rep, now)
	want := `
Instances failing EC2 status checks:
  solo-abc (node ip-10-0-0-1.ec2.internal, nodepool solo) i-1: InstanceStatus reachability for 75s; replaced in 45s
  pair-def (no node, nodepool pair) i-2: SystemStatus reachability for 3m, EventStatus instance-retirement for 0s; being replaced
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	printInstanceReport(&out, &awsinstancestatus.Report{Polled: now.Add(-time.Minute), Error: "UnauthorizedOperation"}, now)
	if out.String() != "\nEC2 instance status: last poll 60s ago failed: UnauthorizedOperation\n" {
		t.Errorf("failed poll: %q", out.String())
	}
	out.Reset()
	printInstanceReport(&out, &awsinstancestatus.Report{Polled: now}, now)
	if out.Len() != 0 {
		t.Errorf("empty report printed %q", out.String())
	}
}
