// Package messages parses the EventBridge events that EC2 and AWS Health
// send to the interruption queue (an SQS queue, Karpenter's
// settings.interruptionQueue) into Messages the interruption controller
// acts on.
//
// Parse is strict: the EventBridge envelope (version, id, detail-type,
// source, account, time, region, detail) must be complete and well formed,
// and each known detail-type's detail must carry what AWS documents for it,
// with instance IDs of EC2's form. A message that is valid JSON in that
// envelope but of a source or detail-type karpx does not handle is KindNoOp
// (no error); anything else is an error. Errors never quote the body: a
// queue may carry other senders' data. Origin.Check then accepts only
// messages whose account and region are this cluster's.
//
// Sources, all from AWS's documentation of the events:
//   - "EC2 Spot Instance Interruption Warning" (Amazon EC2 User Guide, "Spot
//     Instance interruption notices"): detail instance-id, instance-action
//     (terminate, stop or hibernate); EC2 acts two minutes after it.
//   - "EC2 Instance Rebalance Recommendation" (Amazon EC2 User Guide, "EC2
//     instance rebalance recommendations"): detail instance-id.
//   - "EC2 Instance State-change Notification" (Amazon EventBridge User
//     Guide, "Amazon EC2 events"): detail instance-id, state (pending,
//     running, stopping, stopped, shutting-down, terminated).
//   - "AWS Health Event" from aws.health with service EC2 and
//     eventTypeCategory scheduledChange (AWS Health User Guide, "Monitoring
//     AWS Health events with Amazon EventBridge"): instance retirement and
//     maintenance, detail affectedEntities[].entityValue, startTime.
package messages
