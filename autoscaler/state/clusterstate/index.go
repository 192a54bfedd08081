package clusterstate

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// The manager cache's field indexes that karpx's cloud-neutral controllers
// list with, registered by IndexFields. Each name is the field path it
// indexes, as controller-runtime's own examples name theirs.
const (
	// PodNodeNameField indexes Pods by spec.nodeName (unbound pods are not
	// indexed).
	PodNodeNameField = "spec.nodeName"
	// NodeProviderIDField indexes Nodes by spec.providerID (Nodes without
	// one are not indexed).
	NodeProviderIDField = "spec.providerID"
	// NodeClaimProviderIDField indexes NodeClaims by status.providerID
	// (NodeClaims not launched yet are not indexed).
	NodeClaimProviderIDField = "status.providerID"
)

// IndexFields registers PodNodeNameField, NodeProviderIDField and
// NodeClaimProviderIDField with indexer (a manager's GetFieldIndexer()). It
// returns the indexer's error (a duplicate registration, or a cache that
// has already started).
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, PodNodeNameField, func(o client.Object) []string {
		return nonEmpty(o.(*corev1.Pod).Spec.NodeName)
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &corev1.Node{}, NodeProviderIDField, func(o client.Object) []string {
		return nonEmpty(o.(*corev1.Node).Spec.ProviderID)
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &karpv1.NodeClaim{}, NodeClaimProviderIDField, func(o client.Object) []string {
		return nonEmpty(o.(*karpv1.NodeClaim).Status.ProviderID)
	})
}

// nonEmpty is the index values of one field: v, or none when v is empty
// (an unscheduled pod, a Node or NodeClaim without providerID is not
// indexed).
func nonEmpty(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}
