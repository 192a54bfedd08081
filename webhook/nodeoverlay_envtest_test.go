package webhook_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeOverlayYAML is a NodeOverlay (karpenter.sh/v1alpha1) that Karpenter's
// CRD accepts, so that only the webhook can refuse it.
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

// TestNodeOverlayDeniedExistingKept runs the manifests' NodeOverlay webhook
// on the real API server: creating a NodeOverlay is denied with KX203
// (dry run and real); a NodeOverlay stored while the webhook did not
// watch them (as one a cluster had before installing karpx) is kept, its
// spec cannot be changed (KX203), its finalizer can be removed and a
// label added (matchConditions keep the webhook out of metadata-only
// updates), and it can be deleted.
func TestNodeOverlayDeniedExistingKept(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	wantKX203 := func(what, stderr string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: admitted", what)
		}
		for _, want := range []string{"KX203", "NodeOverlay", "not supported by karpx yet"} {
			if !strings.Contains(stderr, want) {
				t.Fatalf("%s: error lacks %q:\n%s", what, want, stderr)
			}
		}
	}
	_, stderr, err := kubectl(t, nodeOverlayYAML("ov-dry"), "create", "--dry-run=server", "-f", "-")
	wantKX203("server dry-run create", stderr, err)
	_, stderr, err = kubectl(t, nodeOverlayYAML("ov-new"), "create", "-f", "-")
	wantKX203("create", stderr, err)
	if _, _, err := kubectl(t, "", "get", "nodeoverlay", "ov-new"); err == nil {
		t.Fatal("the denied NodeOverlay was stored")
	}

	// A NodeOverlay from before karpx: stored while the configuration
	// lacks the NodeOverlay webhook, which is then put back.
	const hookName = "nodeoverlays.karpx.io"
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := suite.client.Get(ctx, types.NamespacedName{Name: "karpx-webhook"}, vwc); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == hookName })
	if i < 0 {
		t.Fatalf("ValidatingWebhookConfiguration karpx-webhook has no webhook %s", hookName)
	}
	hook := *vwc.Webhooks[i].DeepCopy()
	restore := func() error {
		cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := suite.client.Get(ctx, types.NamespacedName{Name: "karpx-webhook"}, cur); err != nil {
			return err
		}
		if slices.ContainsFunc(cur.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == hookName }) {
			return nil
		}
		cur.Webhooks = append(cur.Webhooks, hook)
		return suite.client.Update(ctx, cur)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Errorf("restoring webhook %s: %v", hookName, err)
		}
	})
	vwc.Webhooks = slices.Delete(vwc.Webhooks, i, i+1)
	if err := suite.client.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NodeOverlay ov-old stored with the NodeOverlay webhook removed", func() error {
		_, stderr, err := kubectl(t, nodeOverlayYAML("ov-old"), "create", "-f", "-")
		if err != nil && !strings.Contains(stderr, "AlreadyExists") {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		return nil
	})
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "patch", "nodeoverlay", "ov-old", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		_, _, _ = kubectl(t, "", "delete", "nodeoverlay", "ov-old", "--ignore-not-found", "--wait=false")
	})
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NodeOverlay webhook back in force", func() error {
		if _, stderr, err := kubectl(t, nodeOverlayYAML("ov-probe"), "create", "--dry-run=server", "-f", "-"); err == nil || !strings.Contains(stderr, "KX203") {
			return fmt.Errorf("create not denied yet: %v %s", err, stderr)
		}
		return nil
	})

	_, stderr, err = kubectl(t, "", "patch", "nodeoverlay", "ov-old", "--type=merge", "-p", `{"spec":{"priceAdjustment":"-20%"}}`)
	wantKX203("spec change", stderr, err)
	if _, stderr, err := kubectl(t, "", "patch", "nodeoverlay", "ov-old", "--type=merge", "-p", `{"metadata":{"finalizers":null,"labels":{"cleanup":"yes"}}}`); err != nil {
		t.Fatalf("metadata-only update denied: %v\n%s", err, stderr)
	}
	ov := &unstructured.Unstructured{}
	ov.SetAPIVersion("karpenter.sh/v1alpha1")
	ov.SetKind("NodeOverlay")
	if err := suite.client.Get(ctx, client.ObjectKey{Name: "ov-old"}, ov); err != nil {
		t.Fatal(err)
	}
	if price, _, _ := unstructured.NestedString(ov.Object, "spec", "priceAdjustment"); price != "-10%" || len(ov.GetFinalizers()) != 0 || ov.GetLabels()["cleanup"] != "yes" {
		t.Fatalf("stored NodeOverlay: priceAdjustment %q, finalizers %v, labels %v; want -10%%, none, cleanup=yes", price, ov.GetFinalizers(), ov.GetLabels())
	}
	if _, stderr, err := kubectl(t, "", "delete", "nodeoverlay", "ov-old"); err != nil {
		t.Fatalf("delete denied: %v\n%s", err, stderr)
	}
	eventually(t, "NodeOverlay ov-old gone", func() error {
		if err := suite.client.Get(ctx, client.ObjectKey{Name: "ov-old"}, ov); !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v", err)
		}
		return nil
	})
}
