package helm

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

func valuesOf(t *testing.T, text string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := sigsyaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("%s has no containers", key(d))
	}
	var args []string
	for _, a := range asSlice(cs[0].(map[string]any)["args"]) {
		args = append(args, a.(string))
	}
	return args
}

// TestChartMetricsSecure renders metrics.secure with a reader: both
// Deployments run --metrics-secure, both ServiceAccounts may create
// TokenReviews and SubjectAccessReviews, ClusterRole karpx-metrics-reader
// grants get on /metrics and the controller's status paths and is bound to
// the reader, and both ServiceMonitors scrape over HTTPS with Prometheus'
// token. The default (off, as Karpenter's chart) renders none of it.
func TestChartMetricsSecure(t *testing.T) {
	off := render(t, "karpx", "karpx", valuesOf(t, "serviceMonitor: {enabled: true}\n"))
	for k, o := range off {
		if o.GetKind() == "Deployment" && slices.Contains(containerArgs(t, o), "--metrics-secure") {
			t.Errorf("default: %s runs --metrics-secure", k)
		}
		if o.GetName() == "karpx-metrics-reader" || o.GetName() == "karpx-metrics-auth" {
			t.Errorf("default renders %s", k)
		}
		if o.GetKind() == "ServiceMonitor" {
			ep, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
			if s := ep[0].(map[string]any)["scheme"]; s != nil {
				t.Errorf("default: %s scheme %v, want plain http", k, s)
			}
		}
	}

	objs := render(t, "karpx", "karpx", valuesOf(t, `
metrics: {secure: true, readers: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]}
serviceMonitor: {enabled: true, endpointConfig: {interval: 15s}}
webhook: {namespace: karpx-system}
`))
	get := func(k string) *unstructured.Unstructured {
		t.Helper()
		if objs[k] == nil {
			t.Fatalf("no %s; rendered %v", k, sortedKeys(objs))
		}
		return objs[k]
	}
	for _, d := range []string{"Deployment karpx/karpx-controller", "Deployment karpx-system/karpx-webhook"} {
		if !slices.Contains(containerArgs(t, get(d)), "--metrics-secure") {
			t.Errorf("%s args %v lack --metrics-secure", d, containerArgs(t, get(d)))
		}
	}
	auth := rules(t, get("ClusterRole /karpx-metrics-auth"))
	var authGot []string
	for _, r := range auth {
		for _, res := range r.resources {
			authGot = append(authGot, res+":"+sliceString(r.verbs))
		}
	}
	slices.Sort(authGot)
	if !slices.Equal(authGot, []string{"subjectaccessreviews:create", "tokenreviews:create"}) {
		t.Errorf("karpx-metrics-auth grants %v, want create on tokenreviews and subjectaccessreviews only", authGot)
	}
	var bound []string
	for _, s := range asSlice(get("ClusterRoleBinding /karpx-metrics-auth").Object["subjects"]) {
		m := s.(map[string]any)
		bound = append(bound, m["namespace"].(string)+"/"+m["name"].(string))
	}
	if !slices.Equal(bound, []string{"karpx/karpx", "karpx-system/karpx-webhook"}) {
		t.Errorf("karpx-metrics-auth bound to %v, want both ServiceAccounts", bound)
	}
	reader := get("ClusterRole /karpx-metrics-reader")
	raw, _, _ := unstructured.NestedSlice(reader.Object, "rules")
	if len(raw) != 1 {
		t.Fatalf("karpx-metrics-reader rules %v", raw)
	}
	r := raw[0].(map[string]any)
	if !slices.Contains(asSlice(r["nonResourceURLs"]), any("/metrics")) || !slices.Equal(asSlice(r["verbs"]), []any{"get"}) || r["resources"] != nil {
		t.Errorf("karpx-metrics-reader rule %v, want get on nonResourceURLs including /metrics", r)
	}
	rb := get("ClusterRoleBinding /karpx-metrics-reader")
	if s := asSlice(rb.Object["subjects"]); len(s) != 1 || s[0].(map[string]any)["name"] != "prometheus" {
		t.Errorf("karpx-metrics-reader bound to %v, want metrics.readers", s)
	}
	for _, sm := range []string{"ServiceMonitor karpx/karpx-controller", "ServiceMonitor karpx-system/karpx-webhook"} {
		ep, _, _ := unstructured.NestedSlice(get(sm).Object, "spec", "endpoints")
		e := ep[0].(map[string]any)
		tls, _ := e["tlsConfig"].(map[string]any)
		if e["scheme"] != "https" || e["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" || tls["insecureSkipVerify"] != true || e["interval"] != "15s" {
			t.Errorf("%s endpoint %v, want https with the ServiceAccount token (and endpointConfig kept)", sm, e)
		}
	}
}

// TestChartNetworkPolicy renders networkPolicy.enabled: each component's
// pods admit ingress only on their ports, metrics from metricsFrom, the
// webhook port from webhookFrom; off by default.
func TestChartNetworkPolicy(t *testing.T) {
	for k, o := range render(t, "karpx", "karpx", map[string]any{}) {
		if o.GetKind() == "NetworkPolicy" {
			t.Errorf("default renders %s", k)
		}
	}
	objs := render(t, "karpx", "karpx", valuesOf(t, `
networkPolicy:
  enabled: true
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  webhookFrom: [{ipBlock: {cidr: 10.0.0.0/16}}]
`))
	want := map[string]map[string]string{
		"NetworkPolicy karpx/karpx-controller": {"8081": "any", "8080": "monitoring"},
		"NetworkPolicy karpx/karpx-webhook":    {"8081": "any", "9443": "10.0.0.0/16", "8080": "monitoring"},
	}
	for k, ports := range want {
		np := objs[k]
		if np == nil {
			t.Fatalf("no %s; rendered %v", k, sortedKeys(objs))
		}
		if types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes"); !slices.Equal(types, []string{"Ingress"}) {
			t.Errorf("%s policyTypes %v", k, types)
		}
		name, _, _ := unstructured.NestedString(np.Object, "spec", "podSelector", "matchLabels", "app.kubernetes.io/name")
		if d := objs["Deployment "+np.GetNamespace()+"/"+name]; d == nil {
			t.Errorf("%s selects app.kubernetes.io/name=%s, no such Deployment", k, name)
		}
		got := map[string]string{}
		ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		for _, in := range ingress {
			m := in.(map[string]any)
			from := "any"
			if f := asSlice(m["from"]); len(f) > 0 {
				peer := f[0].(map[string]any)
				if ip, ok := peer["ipBlock"].(map[string]any); ok {
					from = ip["cidr"].(string)
				} else {
					from, _, _ = unstructured.NestedString(peer, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
				}
			}
			for _, p := range asSlice(m["ports"]) {
				got[toString(p.(map[string]any)["port"])] = from
			}
		}
		if len(got) != len(ports) {
			t.Errorf("%s admits %v, want %v", k, got, ports)
		}
		for p, from := range ports {
			if got[p] != from {
				t.Errorf("%s port %s admits %q, want %q (all: %v)", k, p, got[p], from, got)
			}
		}
	}
}

func sliceString(s []string) string { return strings.Join(s, ",") }

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.Itoa(int(x))
	case int64:
		return strconv.Itoa(int(x))
	case int:
		return strconv.Itoa(x)
	}
	return ""
}
