// Package instancestatus reads EC2's status checks and scheduled events
// for the instances of the account and region (DescribeInstanceStatus),
// as Karpenter v1.14's AWS provider does
// (aws/karpenter-provider-aws pkg/providers/instancestatus/instancestatus.go@v1.14.0).
//
// Provider.List makes three paginated DescribeInstanceStatus calls, since
// EC2 ANDs filters of different names and the three conditions are ORed:
// instance-status.status=impaired, system-status.status=impaired, and
// event.code in the scheduled event codes that mean the host needs
// vacating (ScheduledEventCodes). An instance found by several calls is
// kept once. It returns, per instance, the failed details: each status
// check detail whose status is "failed", with EC2's impairedSince, and
// every scheduled event, timed from when it is seen whatever its
// notBefore. Due keeps what Karpenter acts on: check details failed for
// at least UnhealthyThreshold (2 min) and the events. Attached EBS status
// failures are not returned, as in Karpenter: a failed volume may be a
// pod's, not the node's. Report is the controller's JSON of its last poll
// (HandlerPath), which `kubectl karpx status` prints.
//
// Every call goes through ec2api.EC2API (in the controller, the batcher
// and the client-side request budget, autoscaler/aws/budget) with the
// caller's context: the controller marks its polls speculative.
package instancestatus
