// Package health is node repair: Karpenter v1.14's node health controller
// (sigs.k8s.io/karpenter pkg/controllers/node/health), behind its feature
// gate NodeRepair (default off, --feature-gates NodeRepair=true).
//
// For a Node of a NodeClaim, the controller looks for a condition that
// matches one of the cloud provider's repair policies
// (cloudprovider.RepairPolicyProvider: on AWS, Ready False or Unknown for
// 30 minutes, and the EKS node monitoring agent's conditions). Once a
// condition has held its status for the policy's toleration duration
// (from its lastTransitionTime), the NodeClaim is annotated
// karpenter.sh/nodeclaim-termination-timestamp with the current time and
// deleted: the termination path (package termination) then deletes the
// pods at once instead of evicting them (PodDisruptionBudgets and
// karpenter.sh/do-not-disrupt do not hold a broken node), terminates the
// instance, and provisioning replaces the node for the pods that became
// pending. Repair stops while more than 20% of a NodePool's Nodes (of the
// cluster's Nodes, for a NodeClaim of no NodePool), rounded up, are
// unhealthy: the Node gets a Warning event NodeRepairBlocked and is looked
// at again 5 minutes later. A repair is counted in
// karpenter_nodeclaims_disrupted_total{reason="unhealthy"} and
// karpenter_nodeclaims_unhealthy_disrupted_total.
//
// Time is read from an injected clock (k8s.io/utils/clock), so the
// toleration durations, which are Karpenter's constants, are tested
// without waiting for them.
package health
