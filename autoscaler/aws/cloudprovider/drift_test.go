package cloudprovider

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// TestSimIsDrifted: a launched NodeClaim is not drifted; one whose image is
// no longer what the class's AMI selector picks is AMIDrifted; one whose
// recorded class hash differs is NodeClassDrifted; a missing class is an
// error, not drift.
func TestSimIsDrifted(t *testing.T) {
	e := newSimEnv(t)
	ctx := context.Background()
	got, err := e.cp.Create(ctx, nodeClaim("default-drift",
		in(corev1.LabelInstanceTypeStable, "m5.large"), in(karpv1.CapacityTypeLabelKey, cloudprovider.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	if reason, err := e.cp.IsDrifted(ctx, got); err != nil || reason != "" {
		t.Fatalf("fresh NodeClaim: IsDrifted = %q, %v; want not drifted", reason, err)
	}
	oldImage := got.DeepCopy()
	oldImage.Status.ImageID = "ami-0123456789abcdef0"
	if reason, err := e.cp.IsDrifted(ctx, oldImage); err != nil || reason != DriftReasonAMI {
		t.Fatalf("old image: IsDrifted = %q, %v; want %s", reason, err, DriftReasonAMI)
	}
	oldClass := got.DeepCopy()
	oldClass.Annotations = map[string]string{NodeClassHashAnnotationKey: "1"}
	if reason, err := e.cp.IsDrifted(ctx, oldClass); err != nil || reason != DriftReasonNodeClass {
		t.Fatalf("old class hash: IsDrifted = %q, %v; want %s", reason, err, DriftReasonNodeClass)
	}
	missing := got.DeepCopy()
	missing.Spec.NodeClassRef.Name = "gone"
	if reason, err := e.cp.IsDrifted(ctx, missing); err == nil || reason != "" {
		t.Fatalf("missing class: IsDrifted = %q, %v; want an error and no drift", reason, err)
	}
}
