package v1

// Condition types of an EC2NodeClass's status.conditions, as Karpenter v1
// (karpenter.k8s.aws/v1) writes them. Ready is True when every other one is.
const (
	// ConditionTypeSubnetsReady is True when spec.subnetSelectorTerms
	// resolved to at least one subnet.
	ConditionTypeSubnetsReady = "SubnetsReady"
	// ConditionTypeSecurityGroupsReady is True when
	// spec.securityGroupSelectorTerms resolved to at least one group.
	ConditionTypeSecurityGroupsReady = "SecurityGroupsReady"
	// ConditionTypeAMIsReady is True when spec.amiSelectorTerms resolved to
	// at least one AMI.
	ConditionTypeAMIsReady = "AMIsReady"
	// ConditionTypeInstanceProfileReady is True when the instance profile
	// (spec.instanceProfile, or the one karpx manages for spec.role) exists.
	ConditionTypeInstanceProfileReady = "InstanceProfileReady"
	// ConditionTypeValidationSucceeded is True when the spec is usable as a
	// whole (a supported AMI family, userData that merges).
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	// ConditionTypeCapacityReservationsReady is True once
	// spec.capacityReservationSelectorTerms resolved (to any number of
	// reservations). It is set only with Karpenter's ReservedCapacity
	// feature gate on, and then counts towards Ready (Karpenter's
	// v1.ConditionTypeCapacityReservationsReady@v1.14.0).
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
	// ConditionTypeReady is the root condition.
	ConditionTypeReady = "Ready"
)

// ConditionTypes lists the EC2NodeClass conditions Ready depends on, in the
// order they are evaluated.
var ConditionTypes = []string{
	ConditionTypeSubnetsReady, ConditionTypeSecurityGroupsReady, ConditionTypeAMIsReady,
	ConditionTypeInstanceProfileReady, ConditionTypeValidationSucceeded,
}

// TerminationFinalizer holds an EC2NodeClass's deletion until no NodeClaim
// uses it and the launch templates karpx created for it are deleted.
// Source: Karpenter's karpenter.k8s.aws/termination finalizer.
const TerminationFinalizer = Group + "/termination"
