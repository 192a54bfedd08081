package helm

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestChartCertManagerCAIssuer renders charts/karpx in cert-manager mode and
// follows the chain cert-manager would: the serving Certificate's issuer is
// a CA Issuer whose Secret is written by a CA Certificate (isCA, key never
// rotated) that a self-signed Issuer signs; the webhook configurations'
// inject-ca-from names the serving Certificate, whose Secret's ca.crt is
// then that CA, so caBundle stays the same across serving renewals. The
// chart before this test had the serving Certificate signed by the
// self-signed Issuer itself: every renewal changed caBundle.
func TestChartCertManagerCAIssuer(t *testing.T) {
	values := map[string]any{}
	if err := sigsyaml.Unmarshal([]byte("webhook: {namespace: karpx-system, certificates: {mode: cert-manager}}\n"), &values); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "karpx", "karpx", values)
	str := func(o *unstructured.Unstructured, path ...string) string {
		s, _, _ := unstructured.NestedString(o.Object, path...)
		return s
	}
	get := func(k string) *unstructured.Unstructured {
		t.Helper()
		o := objs[k]
		if o == nil {
			t.Fatalf("no %s; rendered %v", k, sortedKeys(objs))
		}
		return o
	}
	serving := get("Certificate karpx-system/karpx-webhook")
	if got := str(serving, "spec", "secretName"); got != "karpx-webhook-cert" {
		t.Errorf("serving Certificate writes %q, want karpx-webhook-cert (the Deployment mounts it)", got)
	}
	caIssuer := get("Issuer karpx-system/" + str(serving, "spec", "issuerRef", "name"))
	caSecret := str(caIssuer, "spec", "ca", "secretName")
	if caSecret == "" {
		t.Fatalf("serving Certificate's issuer %s is not a CA Issuer: %v", caIssuer.GetName(), caIssuer.Object["spec"])
	}
	var ca *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Certificate" && o.GetNamespace() == "karpx-system" && str(o, "spec", "secretName") == caSecret {
			ca = o
		}
	}
	if ca == nil {
		t.Fatalf("no Certificate writes the CA Issuer's Secret %s", caSecret)
	}
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA {
		t.Errorf("Certificate %s (the CA) lacks isCA: true", ca.GetName())
	}
	if got := str(ca, "spec", "privateKey", "rotationPolicy"); got != "Never" {
		t.Errorf("CA Certificate privateKey.rotationPolicy %q, want Never (the CA's key survives its renewal)", got)
	}
	if got := str(ca, "spec", "duration"); got != "87600h" {
		t.Errorf("CA Certificate duration %q, want the caDuration default 87600h", got)
	}
	root := get("Issuer karpx-system/" + str(ca, "spec", "issuerRef", "name"))
	if _, ok, _ := unstructured.NestedMap(root.Object, "spec", "selfSigned"); !ok {
		t.Errorf("CA Certificate's issuer %s is not self-signed: %v", root.GetName(), root.Object["spec"])
	}
	for _, k := range []string{"MutatingWebhookConfiguration /karpx-webhook", "ValidatingWebhookConfiguration /karpx-webhook"} {
		if got := get(k).GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "karpx-system/karpx-webhook" {
			t.Errorf("%s: inject-ca-from %q, want karpx-system/karpx-webhook (the serving Certificate, whose ca.crt is the CA)", k, got)
		}
	}
	// The webhook reads no Secret and writes no configuration here.
	for _, k := range []string{"Role karpx-system/karpx-webhook", "ClusterRole /karpx-webhook"} {
		for _, r := range rules(t, get(k)) {
			if slices.Contains(r.resources, "secrets") || slices.Contains(r.resources, "mutatingwebhookconfigurations") {
				t.Errorf("%s grants %v on %v in cert-manager mode", k, r.verbs, r.resources)
			}
		}
	}
}

// TestChartWebhookReadsOnlyItsSecret renders the default (self) mode: the
// webhook's Role names its certificate Secret and grants no list, and the
// configurations it patches are named too.
func TestChartWebhookReadsOnlyItsSecret(t *testing.T) {
	objs := render(t, "karpx", "karpx", map[string]any{})
	for _, c := range []struct{ obj, resource, name string }{
		{"Role karpx/karpx-webhook", "secrets", "karpx-webhook-cert"},
		{"ClusterRole /karpx-webhook", "mutatingwebhookconfigurations", "karpx-webhook"},
		{"ClusterRole /karpx-webhook", "validatingwebhookconfigurations", "karpx-webhook"},
	} {
		o := objs[c.obj]
		if o == nil {
			t.Fatalf("no %s; rendered %v", c.obj, sortedKeys(objs))
		}
		found := false
		for _, r := range rules(t, o) {
			if !slices.Contains(r.resources, c.resource) {
				continue
			}
			found = true
			if !slices.Equal(r.names, []string{c.name}) || slices.Contains(r.verbs, "list") || slices.Contains(r.verbs, "*") {
				t.Errorf("%s: %v on %v named %v; want verbs without list on %s only", c.obj, r.verbs, r.resources, r.names, c.name)
			}
		}
		if !found {
			t.Errorf("%s grants nothing on %s: the rotator cannot run", c.obj, c.resource)
		}
	}
}

type rule struct{ resources, verbs, names []string }

func rules(t *testing.T, o *unstructured.Unstructured) []rule {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(o.Object, "rules")
	var out []rule
	for _, r := range raw {
		m := r.(map[string]any)
		strs := func(k string) []string {
			var s []string
			for _, v := range asSlice(m[k]) {
				s = append(s, v.(string))
			}
			return s
		}
		out = append(out, rule{strs("resources"), strs("verbs"), strs("resourceNames")})
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
