package cloudprovider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// cloud answers Delete and Get as told and records what Delete was given.
type cloud struct {
	cloudprovider.CloudProvider // the methods TerminateInstance does not call panic
	deleteErr, getErr           error
	shuttingDown                bool
	deleted                     *karpv1.NodeClaim
	gets                        int
}

func (c *cloud) Delete(_ context.Context, nc *karpv1.NodeClaim) error {
	c.deleted = nc
	return c.deleteErr
}

func (c *cloud) Get(_ context.Context, providerID string) (*karpv1.NodeClaim, error) {
	c.gets++
	if c.getErr != nil {
		return nil, c.getErr
	}
	nc := &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
	if c.shuttingDown {
		nc.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_800_000_000, 0)}
	}
	return nc, nil
}

func TestTerminateInstanceReportsGoneOnlyOnTheCloudsWord(t *testing.T) {
	const id = "aws:///us-east-1a/i-0123456789abcdef0"
	notFound := &cloudprovider.NodeClaimNotFoundError{Err: errors.New("gone")}
	throttled := errors.New("RequestLimitExceeded")
	for _, tt := range []struct {
		name     string
		c        *cloud
		wantGone bool
		wantErr  error
		wantGets int
	}{
		{"Delete answers not found", &cloud{deleteErr: notFound}, true, nil, 0},
		{"shutting down after Delete", &cloud{shuttingDown: true}, true, nil, 1},
		{"Get answers not found after Delete", &cloud{getErr: notFound}, true, nil, 1},
		{"still running after Delete", &cloud{}, false, nil, 1},
		{"Delete fails", &cloud{deleteErr: throttled}, false, throttled, 0},
		{"Get fails", &cloud{getErr: throttled}, false, throttled, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gone, err := cloudprovider.TerminateInstance(context.Background(), tt.c, nil, id)
			if gone != tt.wantGone || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) || tt.c.gets != tt.wantGets {
				t.Errorf("TerminateInstance = %t, %v after %d Gets; want %t, %v after %d", gone, err, tt.c.gets, tt.wantGone, tt.wantErr, tt.wantGets)
			}
		})
	}
}

func TestTerminateInstanceNamesTheNodeClaim(t *testing.T) {
	const id = "aws:///us-east-1a/i-0123456789abcdef0"
	// A NodeClaim whose status lost its providerID is deleted by the given
	// one, keeping its name and labels (the cloud finds the instance by them).
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}}}
	c := &cloud{shuttingDown: true}
	if _, err := cloudprovider.TerminateInstance(context.Background(), c, nc, id); err != nil {
		t.Fatal(err)
	}
	if c.deleted.Status.ProviderID != id || c.deleted.Name != "default-abc" || c.deleted.Labels[karpv1.NodePoolLabelKey] != "default" {
		t.Errorf("Delete got %s %v %q, want default-abc with its labels and %q", c.deleted.Name, c.deleted.Labels, c.deleted.Status.ProviderID, id)
	}
	if nc.Status.ProviderID != "" {
		t.Errorf("the caller's NodeClaim was changed: providerID %q", nc.Status.ProviderID)
	}
}
