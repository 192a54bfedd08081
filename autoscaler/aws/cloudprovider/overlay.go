package cloudprovider

import (
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/nodeoverlay"
)

// UseNodeOverlays makes Create apply the NodeOverlays of store to the
// instance types of a NodeClaim that Karpenter's scheduler marked as
// overlaid (karpenter.sh/price-overlay-applied or
// karpenter.sh/capacity-overlay-applied). Call it before the first Create;
// the operator does when the NodeOverlay feature gate is on.
func (c *CloudProvider) UseNodeOverlays(store *nodeoverlay.Store) { c.overlays = store }

// overlaid returns the instance types Create chooses from for nodeClaim:
// types after the NodeOverlays when the NodeClaim carries one of the
// overlay annotations, else types; and whether to launch with the
// prioritized allocation strategies (a price overlay applied), as
// Karpenter's AWS provider does (github.com/aws/karpenter-provider-aws
// v1.14.0 pkg/providers/instance/instance.go). It returns
// *nodeoverlay.UnevaluatedNodePoolError, which lifecycle retries, when the
// overlays were not evaluated against the NodeClaim's NodePool yet.
func (c *CloudProvider) overlaid(nodeClaim *karpv1.NodeClaim, types []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, bool, error) {
	_, price := nodeClaim.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey]
	_, capacity := nodeClaim.Annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey]
	if c.overlays == nil || (!price && !capacity) {
		return types, false, nil
	}
	out, err := c.overlays.ApplyToNodeClaim(nodeClaim, types)
	if err != nil {
		return nil, false, err
	}
	return out, price, nil
}

// addOverlaidCapacity adds the extended resources NodeOverlays gave it to
// the NodeClaim's status.capacity (status.allocatable is it's already), as
// Karpenter reports an overlaid instance type's capacity.
func addOverlaidCapacity(nc *karpv1.NodeClaim, it *cloudprovider.InstanceType) {
	for r := range it.CapacityOverlays {
		if nc.Status.Capacity == nil {
			continue
		}
		if q, ok := it.Capacity[r]; ok {
			nc.Status.Capacity[r] = q.DeepCopy()
		}
	}
}
