package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// MaxInstanceTypes caps NodeClaimPlan.InstanceTypes and the
// node.kubernetes.io/instance-type requirement of a plan: at most this many
// of the cheapest fitting types are kept.
//
// Source: Karpenter's AWS provider sends at most 60 instance types to one
// EC2 CreateFleet request (const maxInstanceTypes = 60 in
// aws/karpenter-provider-aws pkg/providers/instance/instance.go). Karpenter
// core truncates to 600 first (MaxInstanceTypes in sigs.k8s.io/karpenter
// v1.13.0 pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go);
// karpx truncates once, to what the launch can use.
const MaxInstanceTypes = 60

// Input is everything Solve looks at. Solve reads it and never modifies it.
type Input struct {
	// Pods are the pending pods to place: unbound, not owned by a
	// DaemonSet (the DaemonSet controller places those on new nodes). A pod
	// is keyed by its UID in Result.Unschedulable (by "namespace/name" when
	// the UID is empty).
	Pods []*corev1.Pod
	// NodePools are the NodePools that may launch nodes, each with the
	// instance types its EC2NodeClass can launch. Their order does not
	// matter: Solve tries them by descending spec.weight, then by name.
	NodePools []NodePoolInput
	// ExistingNodes are existing Nodes and in-flight NodeClaims (launched
	// but not ready for pods yet). They are filled before new NodeClaims
	// are planned, with the same constraints; their Pods count for pod
	// affinity and anti-affinity, topology spread and host ports.
	ExistingNodes []ExistingNode
	// DaemonSetPods (optional) are the pods of the cluster's DaemonSets, one
	// per DaemonSet. Each one whose requirements a NodePool can satisfy and
	// that tolerates the NodePool's taints adds its requests to every new
	// node of that NodePool.
	DaemonSetPods []*corev1.Pod
	// VolumeRequirements (optional) are, per pod UID, node requirements
	// that come from the pod's volumes: the zones of its bound
	// PersistentVolumes' nodeAffinity and of the allowedTopologies of the
	// StorageClass of its unbound WaitForFirstConsumer claims (see package
	// volumetopology). They are ANDed with every required node affinity
	// term of the pod.
	VolumeRequirements map[types.UID][]corev1.NodeSelectorRequirement
	// MinValuesPolicy is what Solve does when a pod fits no NodeClaim
	// that keeps a NodePool's minValues: Strict ("" too) leaves the pod
	// unschedulable; BestEffort plans the NodeClaim with the values that
	// are left, lowers minValues to that count and marks the plan
	// (NodeClaimPlan.MinValuesRelaxed). Strict placements are always tried
	// first. Source: Karpenter's --min-values-policy (MIN_VALUES_POLICY),
	// default Strict.
	MinValuesPolicy MinValuesPolicy
	// UnavailableNodePools (optional) are NodePools that may not launch
	// nodes now: their EC2NodeClass is missing or not Ready, their
	// provisioning is paused, their instance types cannot be resolved.
	// Solve never plans on them; a pod they could otherwise take (it
	// tolerates their taints and satisfies their requirements) is told
	// their Reason first in Result.Unschedulable.
	UnavailableNodePools []UnavailableNodePool
	// NamespaceLabels (optional) are the labels of the cluster's
	// Namespaces, by name: a pod (anti-)affinity term's namespaceSelector
	// selects the namespaces whose labels it matches, as in the
	// kube-scheduler (and Karpenter, which lists Namespaces for it). A
	// namespace absent here has no labels. Only needed when some pod's
	// term has a non-empty namespaceSelector.
	NamespaceLabels map[string]map[string]string
}

// UnavailableNodePool is a NodePool Solve must not launch from, and why.
type UnavailableNodePool struct {
	// NodePool is the karpenter.sh/v1 NodePool.
	NodePool *karpv1.NodePool
	// Reason completes "NodePool <name> cannot launch nodes: ", naming the
	// cause and the fix, for example "EC2NodeClass nosubnet is not ready:
	// SubnetsReady=False: ...".
	Reason string
}

// MinValuesPolicy is Input.MinValuesPolicy: "Strict" or "BestEffort".
type MinValuesPolicy string

// The minValues policies, named as Karpenter's --min-values-policy values.
const (
	MinValuesPolicyStrict     MinValuesPolicy = "Strict"
	MinValuesPolicyBestEffort MinValuesPolicy = "BestEffort"
)

// NodePoolInput is one NodePool with what it may launch.
type NodePoolInput struct {
	// NodePool is the karpenter.sh/v1 NodePool. NodePools with
	// spec.replicas set (static NodePools) or a deletion timestamp are not
	// used for pending pods, as in Karpenter.
	NodePool *karpv1.NodePool
	// InstanceTypes are the types the NodePool's EC2NodeClass can launch
	// (cloudprovider.CloudProvider.GetInstanceTypes), with their offerings.
	// Solve keeps the ones that satisfy the NodePool's requirements and have
	// at least one available, compatible offering.
	InstanceTypes []*cloudprovider.InstanceType
	// Remaining is how much more the NodePool may launch: spec.limits minus
	// the capacity of the nodes it already has, per resource (cpu in cores,
	// memory in bytes, "nodes" as a count, …). nil means unlimited; a
	// resource absent from the list is unlimited. Each new plan counts the
	// status.capacity of its cheapest instance type against it.
	Remaining corev1.ResourceList

	// unavailable is UnavailableNodePool.Reason for the pools Solve keeps
	// only to explain why pods stay pending.
	unavailable string
}

// ExistingNode is a Node, or a NodeClaim whose Node is not ready for pods
// yet, that pending pods may be placed on.
type ExistingNode struct {
	// Name is the Node (or NodeClaim) name; it keys
	// Result.ExistingPlacements.
	Name string
	// Labels are the node's labels (instance type, zone, capacity type,
	// NodePool, template labels, …), matched against each pod's nodeSelector
	// and required node affinity.
	Labels map[string]string
	// Taints are the taints pods must tolerate. Leave out startup taints,
	// and karpenter.sh/unregistered on a node whose NodeClaim will
	// register it (registration removes it); kept, it blocks pods that do
	// not tolerate it, as it does for the kube-scheduler.
	Taints []corev1.Taint
	// Available is what pods can still request on the node: allocatable
	// minus the requests of pods (DaemonSet pods included) already bound or
	// nominated to it. A resource absent here counts as zero, so include at
	// least cpu, memory and pods.
	Available corev1.ResourceList
	// Pods are the pods already bound or nominated to the node (DaemonSet
	// pods included). Their requests are already out of Available; they
	// count for pod affinity and anti-affinity (both ways), topology spread
	// domains and host ports.
	Pods []*corev1.Pod
	// Reservations (optional) are the ids of the capacity reservations an
	// in-flight NodeClaim not launched yet holds a place in (its
	// ReservationsAnnotationKey): each takes one place of the
	// reservation's Offering.ReservationCapacity, which counts only
	// launched instances. Leave it empty once the NodeClaim is launched.
	Reservations []string
}

// Result is what Solve decided. Every input pod appears in exactly one of
// NewNodeClaims, ExistingPlacements or Unschedulable.
type Result struct {
	// NewNodeClaims are the nodes to launch, in the order they were opened
	// (the first holds the largest pod).
	NewNodeClaims []NodeClaimPlan
	// ExistingPlacements maps an ExistingNode name to the pods expected to
	// land there. Nodes that take no pod are absent.
	ExistingPlacements map[string][]*corev1.Pod
	// Unschedulable maps a pod UID to why no NodePool can launch a node for
	// it. The error names each NodePool tried, the constraint that failed
	// and, where there is one, the fix.
	Unschedulable map[types.UID]error
}

// NodeClaimPlan is one node to launch: a NodePool, the pods it is for, and
// every instance type (and offering) that fits them all.
type NodeClaimPlan struct {
	// NodePool is the NodePool the node is launched from.
	NodePool *karpv1.NodePool
	// Pods are the pods the node is for, in placement order.
	Pods []*corev1.Pod
	// Requests is the sum of the pods' requests (cpu in cores, memory in
	// bytes, pods as a count, plus any other resource they request) and
	// the NodePool's DaemonSet overhead.
	Requests corev1.ResourceList
	// Requirements are the NodeClaim's spec.requirements: the NodePool's
	// requirements and template labels intersected with the pods'
	// nodeSelector and required node affinity (one expression per
	// operator), plus node.kubernetes.io/instance-type In InstanceTypes
	// (cheapest first) and karpenter.sh/capacity-type and
	// topology.kubernetes.io/zone In the values their offerings allow.
	// Sorted by key.
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	// InstanceTypes are the types that fit every pod in Pods (and the
	// DaemonSet overhead) and satisfy every requirement, cheapest first by
	// the price of their cheapest compatible available offering (ties by
	// name); at most MaxInstanceTypes.
	InstanceTypes []*cloudprovider.InstanceType
	// PriceUSDPerHour is the hourly price in USD of the cheapest compatible
	// available offering of InstanceTypes[0]: what the node costs if EC2
	// launches the cheapest option.
	PriceUSDPerHour float64
	// MinValuesRelaxed is set when Input.MinValuesPolicy is BestEffort and
	// the plan keeps fewer values of a key than the NodePool's minValues;
	// Requirements then carry the lowered minValues, and NodeClaim adds
	// the karpenter.sh/nodeclaim-min-values-relaxed: "true" annotation
	// ("false" when not set), as Karpenter does.
	MinValuesRelaxed bool
	// Reservations are the ids, sorted, of the capacity reservations the
	// plan holds a place in: those of the reserved offerings its
	// instance types may launch into, each counted once against the
	// reservation's Offering.ReservationCapacity for the other plans of
	// the Solve call (Karpenter v1.14.0's ReservationManager). NodeClaim
	// records them in ReservationsAnnotationKey.
	Reservations []string
}
