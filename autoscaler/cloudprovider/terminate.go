package cloudprovider

import (
	"context"
	"fmt"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TerminateInstance terminates the instance behind providerID (nc may be
// nil when the NodeClaim is already gone) and reports whether the cloud
// reports it shutting-down or terminated (Get answers NotFound, or a
// NodeClaim with a deletion timestamp). It returns cloud errors other than "not
// found" so the caller retries; the instance is never assumed gone on an
// error.
func TerminateInstance(ctx context.Context, cloud CloudProvider, nc *karpv1.NodeClaim, providerID string) (bool, error) {
	view := nc
	if view == nil || view.Status.ProviderID == "" {
		view = &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
		if nc != nil {
			view.Name, view.Labels = nc.Name, nc.Labels
		}
	}
	if err := cloud.Delete(ctx, view); err != nil {
		if IsNodeClaimNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("terminating instance %s: %w", providerID, err)
	}
	got, err := cloud.Get(ctx, providerID)
	if err != nil {
		if IsNodeClaimNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("checking instance %s: %w", providerID, err)
	}
	// The cloud view of a shutting-down instance has a deletion timestamp.
	return !got.DeletionTimestamp.IsZero(), nil
}
