// Package instancestatus replaces the NodeClaims of instances that fail
// EC2 status checks or have a scheduled maintenance event, as Karpenter
// v1.14's AWS provider does in its interruption.instancestatus controller
// (aws/karpenter-provider-aws
// pkg/controllers/interruption/instancestatus_controller.go and utils.go
// @v1.14.0). As there, it runs whatever the feature gates and the
// interruption queue: Karpenter registers it unconditionally.
//
// The Controller (a leader-only manager.Runnable) polls every Interval
// (1 min, Karpenter's InstanceStatusInterval) with
// autoscaler/aws/providers/instancestatus, finds each instance's
// NodeClaim by the instance ID at the end of status.providerID, and, for
// what is due (instancestatus.Due):
//
//   - an instance or system status check failed for 2 minutes: the
//     NodeClaim is annotated karpenter.sh/nodeclaim-termination-timestamp
//     with the time and deleted, so its Node is drained forcefully (pods
//     deleted, PodDisruptionBudgets not waited for) and the provisioner
//     launches a replacement for the pods: Karpenter's
//     ForcefulTermination;
//   - a scheduled event: the NodeClaim is deleted and drained gracefully
//     (Karpenter's CordonAndDrain), unless karpx's interruption controller
//     already marked it (cloudprovider.InterruptionAnnotationKey) from the
//     same event on the queue and is replacing it first.
//
// Each action publishes InstanceUnhealthy and TerminatingOnInterruption
// events on the NodeClaim and its Node, logs "deleting the NodeClaim of
// an instance failing EC2 status checks" with the NodeClaim, NodePool,
// Node, instance, kind and impairedSince, and counts
// karpenter_nodeclaims_disrupted_total{reason=instance_status|system_status|event_status}.
// karpenter_interruption_instance_status_unhealthy_total{category} counts
// each instance and category once while it stays unhealthy (again if it
// recovers and fails anew), as Karpenter's. NodeClaims already being
// deleted are left alone; instances without a NodeClaim (not this
// cluster's) are ignored.
//
// A failed poll changes nothing and the next one waits the full Interval:
// every call goes through the batcher and the client-side budget at
// speculative priority, so a throttled or failing EC2 never turns the poll
// into a retry storm. UnauthorizedOperation (the IAM policy lacks
// ec2:DescribeInstanceStatus) stops polling with one error log, as in
// Karpenter, until the controller restarts.
//
// The last poll is served as JSON (instancestatus.Report) by Handler, at
// instancestatus.HandlerPath on the controller's status address, for
// `kubectl karpx status`.
package instancestatus
