package webhook_test

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeOverlayYAML is a NodeOverlay (karpenter.sh/v1alpha1) that Karpenter's
// CRD accepts, so that only the webhook could refuse it.
func nodeOverlayYAML(name string) string {
	return fmt.Sprintf(`apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: %s
  finalizers: ["example.com/keep"]
spec:
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["c7g"]
  priceAdjustment: "-10%%"
`, name)
}

// TestNodeOverlayAdmitted runs the manifests' NodeOverlay webhook on the
// real API server: karpx applies NodeOverlays (issue 33), so creating one
// (dry run and real), changing its spec, removing its finalizer and
// deleting it are all admitted.
func TestNodeOverlayAdmitted(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	if _, stderr, err := kubectl(t, nodeOverlayYAML("ov-dry"), "create", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("server dry-run create denied: %v\n%s", err, stderr)
	}
	if _, stderr, err := kubectl(t, nodeOverlayYAML("ov-new"), "create", "-f", "-"); err != nil {
		t.Fatalf("create denied: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "patch", "nodeoverlay", "ov-new", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		_, _, _ = kubectl(t, "", "delete", "nodeoverlay", "ov-new", "--ignore-not-found", "--wait=false")
	})
	if _, stderr, err := kubectl(t, "", "patch", "nodeoverlay", "ov-new", "--type=merge", "-p", `{"spec":{"priceAdjustment":"-20%"}}`); err != nil {
		t.Fatalf("spec change denied: %v\n%s", err, stderr)
	}
	if _, stderr, err := kubectl(t, "", "patch", "nodeoverlay", "ov-new", "--type=merge", "-p", `{"metadata":{"finalizers":null,"labels":{"cleanup":"yes"}}}`); err != nil {
		t.Fatalf("metadata-only update denied: %v\n%s", err, stderr)
	}
	ov := &unstructured.Unstructured{}
	ov.SetAPIVersion("karpenter.sh/v1alpha1")
	ov.SetKind("NodeOverlay")
	if err := suite.client.Get(ctx, client.ObjectKey{Name: "ov-new"}, ov); err != nil {
		t.Fatal(err)
	}
	if price, _, _ := unstructured.NestedString(ov.Object, "spec", "priceAdjustment"); price != "-20%" || len(ov.GetFinalizers()) != 0 || ov.GetLabels()["cleanup"] != "yes" {
		t.Fatalf("stored NodeOverlay: priceAdjustment %q, finalizers %v, labels %v; want -20%%, none, cleanup=yes", price, ov.GetFinalizers(), ov.GetLabels())
	}
	if _, stderr, err := kubectl(t, "", "delete", "nodeoverlay", "ov-new"); err != nil {
		t.Fatalf("delete denied: %v\n%s", err, stderr)
	}
	eventually(t, "NodeOverlay ov-new gone", func() error {
		if err := suite.client.Get(ctx, client.ObjectKey{Name: "ov-new"}, ov); !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v", err)
		}
		return nil
	})
}
