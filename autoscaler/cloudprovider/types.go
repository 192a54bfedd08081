package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Capacity types, as in the karpenter.sh/capacity-type label.
const (
	CapacityTypeOnDemand = karpv1.CapacityTypeOnDemand // "on-demand"
	CapacityTypeSpot     = karpv1.CapacityTypeSpot     // "spot"
	// CapacityTypeReserved is capacity in an EC2 capacity reservation
	// (Karpenter's ReservedCapacity feature gate).
	CapacityTypeReserved = karpv1.CapacityTypeReserved // "reserved"
)

// Offering is one place and purchase option an instance type can be launched
// with: a zone and a capacity type, at a price.
type Offering struct {
	// Zone is the availability zone name, for example "us-east-1a".
	Zone string
	// CapacityType is "on-demand", "spot" or "reserved".
	CapacityType string
	// ReservationID is the capacity reservation of a "reserved" offering
	// (label karpenter.k8s.aws/capacity-reservation-id), "" otherwise.
	ReservationID string `json:",omitempty"`
	// ReservationType is "default" or "capacity-block" for a "reserved"
	// offering (label karpenter.k8s.aws/capacity-reservation-type), ""
	// otherwise.
	ReservationType string `json:",omitempty"`
	// ReservationCapacity is, for a "reserved" offering, how many more
	// instances its reservation takes (EC2's AvailableInstanceCount as
	// last described, less launches since); 0 otherwise. The scheduler
	// plans at most that many NodeClaims onto the reservation per pass
	// (Karpenter's Offering.ReservationCapacity@v1.14.0).
	ReservationCapacity int `json:",omitempty"`
	// PriceUSDPerHour is the hourly price in USD.
	PriceUSDPerHour float64
	// Available is false while the offering is known to be out of capacity
	// (a recent InsufficientInstanceCapacity) or not offered in the zone.
	Available bool
	// PriceOverlay names the karpenter.sh/v1alpha1 NodeOverlay whose
	// spec.price or spec.priceAdjustment set PriceUSDPerHour, or is empty
	// when the price is the cloud's (package autoscaler/nodeoverlay).
	PriceOverlay string
}

// InstanceType is an instance type as the scheduler sees it: the labels a
// node of this type carries, what it can hold, and where it can be bought.
type InstanceType struct {
	// Name is the EC2 instance type, for example "m5.large".
	Name string
	// Labels are the single-valued node labels of this type
	// (node.kubernetes.io/instance-type, kubernetes.io/arch, kubernetes.io/os,
	// karpenter.k8s.aws/instance-*). Zone and capacity type are not here:
	// they vary per Offering.
	Labels map[string]string
	// Capacity is the node's status.capacity (cpu, memory, pods, …).
	Capacity corev1.ResourceList
	// Allocatable is the node's status.allocatable: what pods can request.
	Allocatable corev1.ResourceList
	// Offerings lists every (zone, capacity type) this type is sold in.
	Offerings []Offering
	// CapacityOverlays names, per extended resource a NodeOverlay's
	// spec.capacity added to Capacity and Allocatable, that NodeOverlay;
	// nil when none applied (package autoscaler/nodeoverlay).
	CapacityOverlays map[corev1.ResourceName]string
}

// CheapestOffering returns the cheapest available offering accepted by ok
// (nil ok accepts every offering) and false when there is none.
func (it *InstanceType) CheapestOffering(ok func(Offering) bool) (Offering, bool) {
	var best Offering
	found := false
	for _, o := range it.Offerings {
		if !o.Available || (ok != nil && !ok(o)) {
			continue
		}
		if !found || o.PriceUSDPerHour < best.PriceUSDPerHour {
			best, found = o, true
		}
	}
	return best, found
}

// CloudProvider launches, finds and terminates the instances behind
// NodeClaims and lists the instance types a NodePool may use.
//
// Every method is safe for concurrent use. Errors are wrapped so that
// errors.As finds the typed errors below; any other error is transient
// (throttling, 5xx, timeouts) and the caller retries with backoff.
type CloudProvider interface {
	// Create launches one instance that satisfies the NodeClaim's
	// requirements and resources and returns a copy of the NodeClaim with
	// status.providerID, status.imageID, status.capacity,
	// status.allocatable and the labels of the chosen instance type, zone
	// and capacity type filled. It returns *InsufficientCapacityError when no
	// offering could be launched and *LaunchError when EC2 rejected the
	// request for a reason retrying will not fix.
	Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// Delete terminates the NodeClaim's instance (found by
	// status.providerID) and returns what the cloud answered: nil once the
	// cloud reports the instance shutting-down or terminated, whether this
	// call or an earlier one asked for it (termination cannot be undone);
	// *NodeClaimNotFoundError when the instance was already gone (or the
	// NodeClaim names none); any other error when the cloud did not confirm
	// the termination, and the caller retries. Callers need no Get after
	// it.
	Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error
	// Get returns the NodeClaim view of the instance with this providerID,
	// or *NodeClaimNotFoundError.
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
	// List returns every instance karpx launched in this cluster that is not
	// terminated, as NodeClaim views carrying providerID and the
	// karpenter.sh/nodeclaim name from the instance's tags.
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
	// GetInstanceTypes returns the instance types the NodePool's
	// EC2NodeClass can launch, with their offerings. It returns
	// *NodeClassNotReadyError when the class's subnets, security groups or
	// AMIs cannot be resolved.
	GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*InstanceType, error)
	// IsDrifted returns why the NodeClaim's instance no longer matches what
	// its EC2NodeClass would launch now, as the reason of Karpenter's
	// provider names it (the AWS provider's "AMIDrift" when its image is no
	// longer selected by spec.amiSelectorTerms, "NodeClassDrift" when a
	// hashed field changed, "SecurityGroupDrift", "SubnetDrift"), or "" when
	// it matches. The NodePool's reasons (DriftReasonNodePool,
	// DriftReasonRequirements, DriftReasonInstanceTypeNotFound) are the
	// disruption controller's, checked before this. It returns an error, never a reason, when that cannot be
	// told (the class not resolvable, a cloud error): nothing is disrupted
	// on a guess.
	IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (string, error)
}

// Drift reasons of the cloud-neutral checks, which the disruption
// controller makes before CloudProvider.IsDrifted: the DriftReason
// constants of Karpenter's core (sigs.k8s.io/karpenter
// pkg/controllers/nodeclaim/disruption/drift.go@v1.14.0), written as the
// reason of the NodeClaim's Drifted condition.
const (
	// DriftReasonNodePool: the NodeClaim's karpenter.sh/nodepool-hash
	// differs from its NodePool's at the same karpenter.sh/nodepool-hash-
	// version (a hashed field of spec.template changed).
	DriftReasonNodePool = "NodePoolDrifted"
	// DriftReasonRequirements: the NodeClaim's labels no longer satisfy its
	// NodePool's spec.template.spec.requirements (the hash leaves them
	// out).
	DriftReasonRequirements = "RequirementsDrifted"
	// DriftReasonInstanceTypeNotFound: the NodeClaim's instance type, or an
	// offering of it in the NodeClaim's zone and capacity type, is no
	// longer among the NodePool's instance types. Checked only once the
	// NodeClaim is older than InstanceTypeNotFoundAfter.
	DriftReasonInstanceTypeNotFound = "InstanceTypeNotFound"
)

// InstanceTypeNotFoundAfter is the age (from creationTimestamp) before
// which a NodeClaim is never InstanceTypeNotFound: Karpenter's hour
// (pkg/controllers/nodeclaim/disruption/drift.go@v1.14.0), which keeps a
// transient gap in the cloud's instance-type list from rolling new nodes.
const InstanceTypeNotFoundAfter = time.Hour

// NodeClaimNotFoundError reports that the instance behind a NodeClaim no
// longer exists (terminated or never created).
type NodeClaimNotFoundError struct{ Err error }

func (e *NodeClaimNotFoundError) Error() string { return fmt.Sprintf("instance not found: %v", e.Err) }
func (e *NodeClaimNotFoundError) Unwrap() error { return e.Err }

// InsufficientCapacityError reports that every offering tried was out of
// capacity (EC2 InsufficientInstanceCapacity and similar). The offerings are
// marked unavailable for a while; provisioning again picks others.
type InsufficientCapacityError struct{ Err error }

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity: %v", e.Err)
}
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// LaunchError is a persistent launch failure: EC2 rejected the request
// (invalid parameter, unauthorized, bad AMI or userData). Code is the AWS
// error code, for example "InvalidParameterValue".
type LaunchError struct {
	Code string
	Err  error
}

func (e *LaunchError) Error() string { return fmt.Sprintf("launch failed (%s): %v", e.Code, e.Err) }
func (e *LaunchError) Unwrap() error { return e.Err }

// NodeClassNotReadyError reports that an EC2NodeClass is missing or its
// selector terms resolve to nothing. Reason names the field to fix, for
// example "spec.subnetSelectorTerms matched no subnet".
type NodeClassNotReadyError struct {
	NodeClass string
	Reason    string
}

func (e *NodeClassNotReadyError) Error() string {
	return fmt.Sprintf("EC2NodeClass %q not ready: %s", e.NodeClass, e.Reason)
}

// IsNodeClaimNotFound reports whether err is or wraps a *NodeClaimNotFoundError.
func IsNodeClaimNotFound(err error) bool {
	var e *NodeClaimNotFoundError
	return errors.As(err, &e)
}
