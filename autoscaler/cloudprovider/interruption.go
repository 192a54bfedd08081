package cloudprovider

// Annotations a cloud's interruption handling (for AWS, the interruption
// controller in autoscaler/aws/controllers/interruption) writes on a
// NodeClaim whose instance the cloud is about to take away. They are the
// contract between that cloud-specific controller and the cloud-neutral
// ones: the disruption controller's interruption method acts on them (so a
// restarted controller resumes), and `kubectl karpx status` shows them.
const (
	// InterruptionAnnotationKey is the interruption kind, as the
	// message_type label of karpenter_interruption_received_messages_total
	// (spot_interrupted, scheduled_change, instance_stopped,
	// instance_terminated, rebalance_recommendation when acted on).
	InterruptionAnnotationKey = "karpx.io/interruption"
	// InterruptionReclaimAtAnnotationKey is when the cloud is expected to
	// take the instance away (RFC 3339, UTC).
	InterruptionReclaimAtAnnotationKey = "karpx.io/interruption-reclaim-at"
	// InterruptionDrainByAnnotationKey is when the node is drained even if
	// its replacements are not Initialized yet (RFC 3339, UTC): pods then
	// wait for the replacements as pending pods instead of dying with the
	// instance.
	InterruptionDrainByAnnotationKey = "karpx.io/interruption-drain-by"
)
