package cloudprovider_test

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// cloud answers Delete as told and records what Delete was given. Every
// other method panics (the embedded interface is nil): TerminateInstance
// must make no Get after Delete.
type cloud struct {
	cloudprovider.CloudProvider
	deleteErr error
	deleted   *karpv1.NodeClaim
	deletes   int
}

func (c *cloud) Delete(_ context.Context, nc *karpv1.NodeClaim) error {
	c.deletes++
	c.deleted = nc
	return c.deleteErr
}

func TestTerminateInstanceReportsGoneOnlyOnTheCloudsWord(t *testing.T) {
	const id = "aws:///us-east-1a/i-0123456789abcdef0"
	notFound := &cloudprovider.NodeClaimNotFoundError{Err: errors.New("gone")}
	throttled := errors.New("RequestLimitExceeded")
	for _, tt := range []struct {
		name    string
		c       *cloud
		wantErr error
	}{
		{"Delete confirms shutting-down", &cloud{}, nil},
		{"Delete answers not found", &cloud{deleteErr: notFound}, nil},
		{"Delete fails", &cloud{deleteErr: throttled}, throttled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := cloudprovider.TerminateInstance(context.Background(), tt.c, nil, id)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) || tt.c.deletes != 1 {
				t.Errorf("TerminateInstance = %v after %d Deletes; want %v after 1", err, tt.c.deletes, tt.wantErr)
			}
		})
	}
}

func TestTerminateInstanceNamesTheNodeClaim(t *testing.T) {
	const id = "aws:///us-east-1a/i-0123456789abcdef0"
	// A NodeClaim whose status lost its providerID is deleted by the given
	// one, keeping its name and labels (the cloud finds the instance by them).
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}}}
	c := &cloud{}
	if err := cloudprovider.TerminateInstance(context.Background(), c, nc, id); err != nil {
		t.Fatal(err)
	}
	if c.deleted.Status.ProviderID != id || c.deleted.Name != "default-abc" || c.deleted.Labels[karpv1.NodePoolLabelKey] != "default" {
		t.Errorf("Delete got %s %v %q, want default-abc with its labels and %q", c.deleted.Name, c.deleted.Labels, c.deleted.Status.ProviderID, id)
	}
	if nc.Status.ProviderID != "" {
		t.Errorf("the caller's NodeClaim was changed: providerID %q", nc.Status.ProviderID)
	}
}
