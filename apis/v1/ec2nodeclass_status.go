package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClassStatus is what karpx resolved from the selector terms.
type EC2NodeClassStatus struct {
	// Subnets resolved from subnetSelectorTerms.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups resolved from securityGroupSelectorTerms.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// AMIs resolved from amiSelectorTerms, each with the requirements
	// (architecture, accelerator) of the instance types it fits.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// CapacityReservations resolved from capacityReservationSelectorTerms
	// (with the ReservedCapacity feature gate on; unset otherwise).
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// InstanceProfile is the instance profile in use.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions include Ready and one per resolved dependency.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// +required
	ID string `json:"id"`
	// +required
	Zone string `json:"zone"`
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// +required
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservation is a resolved EC2 capacity reservation (EC2
// DescribeCapacityReservations, CapacityReservation).
type CapacityReservation struct {
	// AvailabilityZone is the reservation's zone, for example "us-west-2a".
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// EndTime is when the reservation ends; unset for one without an end.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// ID is the reservation's ID, for example "cr-0123456789abcdef0".
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// InstanceMatchCriteria is "open" or "targeted".
	// +kubebuilder:validation:Enum:={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// InstanceType is the reserved instance type, for example "p5.48xlarge".
	// +required
	InstanceType string `json:"instanceType"`
	// Interruptible is true for a reservation whose capacity its owner may
	// reclaim.
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`
	// OwnerID is the 12-digit account that owns the reservation.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// ReservationType is "default" (an on-demand capacity reservation) or
	// "capacity-block" (EC2 Capacity Blocks for ML).
	// +kubebuilder:validation:Enum:={default,capacity-block}
	// +kubebuilder:default=default
	// +optional
	ReservationType string `json:"reservationType,omitempty"`
	// State is "active", or "expiring" once the end is near.
	// +kubebuilder:validation:Enum:={active,expiring}
	// +kubebuilder:default=active
	// +optional
	State string `json:"state,omitempty"`
}

// AMI is a resolved image and the node requirements it serves.
type AMI struct {
	// +required
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
	// Deprecated is true when EC2 reports the image as deprecated.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// Requirements are node selector requirements (kubernetes.io/arch,
	// karpenter.k8s.aws/instance-gpu-count, …) that an instance type must
	// meet to boot this AMI.
	// +required
	Requirements []NodeSelectorRequirement `json:"requirements"`
}

// NodeSelectorRequirement mirrors corev1.NodeSelectorRequirement so that the
// status schema stays self-contained.
type NodeSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// AMIFamilyName returns the AMI family this class boots, as Karpenter
// decides it: spec.amiFamily when set (with an alias term the CRD allows
// only the alias's family or Custom, and Custom means userData is passed
// through verbatim while the alias still selects the images), else the
// family of the alias term, else "" (unknown; the CRD requires one of the
// two).
func (in *EC2NodeClass) AMIFamilyName() string {
	if in.Spec.AMIFamily != nil {
		return *in.Spec.AMIFamily
	}
	for _, t := range in.Spec.AMISelectorTerms {
		if t.Alias != "" {
			if f, _, err := t.Family(); err == nil {
				return f
			}
		}
	}
	return ""
}
