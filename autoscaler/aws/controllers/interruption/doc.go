// Package interruption acts on EC2's advance notices: spot interruption
// warnings, rebalance recommendations, AWS Health scheduled changes
// (instance retirement, maintenance) and instance state changes, read from
// the interruption queue (--interruption-queue, Karpenter's
// settings.interruptionQueue; off when empty).
//
// The Controller long-polls the queue (package autoscaler/aws/providers/sqs), parses each
// message strictly (package messages) and finds the NodeClaim by instance
// ID (the InstanceIDField index of status.providerID). Then, by kind:
//
//   - spot interruption, scheduled change, stopping/stopped and
//     shutting-down: the spot offering (instance type, zone, spot) goes
//     into the unavailable-offerings cache, so nothing launches into the
//     doomed pool again; the NodeClaim is marked with the
//     cloudprovider.Interruption* annotations (kind, when EC2 reclaims the
//     instance, when it is drained at the latest: halfway there) and
//     SpotInterrupted / InstanceUnhealthy / InstanceStopping /
//     InstanceTerminating events on it and its Node; and the disruption
//     controller is triggered. Its interruption method launches the
//     replacements first, planned by the provisioner's scheduling code
//     with every interrupted node left out, and deletes the NodeClaim once
//     they are Initialized (or at the drain deadline), so the Node drains
//     through package termination's Eviction-API path, PodDisruptionBudgets
//     honoured;
//   - rebalance recommendation: a SpotRebalanceRecommendation event and the
//     received-messages metric only, unless Options.ActOnRebalance, then as
//     a spot interruption (without marking the offering);
//   - terminated: the NodeClaim and its Node are deleted at once, without
//     waiting for garbage collection.
//
// A parsed message is acted on only when its envelope's account is the
// queue owner's (the account in the queue URL, sqs.Provider.OwnerAccount)
// and its region is Options.Region (messages.Origin): EventBridge rules on
// this account's default bus deliver nothing else. Any other message is
// counted (karpx_interruption_rejected_messages_total{reason}), logged by
// its id and the offending field, deleted, and moves nothing.
//
// Every message is deleted once acted on; a malformed or unknown message
// is counted, logged by its id and the parse error (never its body) and
// deleted; a message whose handling failed (the API server did not answer)
// stays and comes back after the queue's visibility timeout. Each instance
// is acted on once, however often its message is delivered: the mark on
// the NodeClaim (and, between a patch and the cache seeing it, an
// in-memory set) says it is done. A queue that errors or throttles only
// delays the next poll (exponential backoff, 1 s to 1 min): nothing in the
// cluster is touched on a failed call.
//
// Metrics carry Karpenter's names: karpenter_interruption_received_messages_total
// {message_type}, karpenter_interruption_deleted_messages_total,
// karpenter_interruption_message_queue_duration_seconds; and
// karpx_interruption_queue_errors_total{operation} and
// karpx_interruption_rejected_messages_total{reason}.
package interruption
