package cloudprovider

import (
	"context"
	"fmt"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TerminateInstance terminates the instance behind providerID with one
// Delete (nc may be nil when the NodeClaim is already gone, or lack
// status.providerID; the cloud is then given a view of it carrying
// providerID and nc's name and labels, and nc itself is not changed). It
// returns nil when the cloud reports the instance shutting-down, terminated
// or gone (Delete's nil or *NodeClaimNotFoundError), and Delete's other
// errors wrapped, so the caller retries: the instance is never assumed gone
// on an error. It makes no other cloud call.
func TerminateInstance(ctx context.Context, cloud CloudProvider, nc *karpv1.NodeClaim, providerID string) error {
	view := nc
	if view == nil || view.Status.ProviderID == "" {
		view = &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
		if nc != nil {
			view.Name, view.Labels = nc.Name, nc.Labels
		}
	}
	if err := cloud.Delete(ctx, view); err != nil && !IsNodeClaimNotFound(err) {
		return fmt.Errorf("terminating instance %s: %w", providerID, err)
	}
	return nil
}
