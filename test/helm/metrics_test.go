package helm

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/karpx/karpx/plugin/throttle"
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

// authRules returns the resource:verbs of o's rules on tokenreviews and
// subjectaccessreviews, sorted.
func authRules(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	var got []string
	for _, r := range rules(t, o) {
		for _, res := range r.resources {
			if res == "tokenreviews" || res == "subjectaccessreviews" {
				got = append(got, res+":"+sliceString(r.verbs))
			}
		}
	}
	slices.Sort(got)
	return got
}

// TestChartMetricsSecure renders the defaults with a reader and the
// ServiceMonitors on: metrics are secure by default (issue 34). Neither
// Deployment turns it off (--metrics-secure is the binaries' default),
// the controller's and the webhook's ClusterRoles may create TokenReviews
// and SubjectAccessReviews, ClusterRole karpx-metrics-reader grants get on
// /metrics only (the status endpoints have a port of their own) and is
// bound to the reader, and both ServiceMonitors scrape over HTTPS with
// Prometheus' token. Control: metrics.secure=false passes
// --metrics-secure=false to both, renders none of the RBAC and scrapes
// plain HTTP, as Karpenter v1.14's chart always does.
func TestChartMetricsSecure(t *testing.T) {
	objs := render(t, "karpx", "karpx", valuesOf(t, `
metrics: {readers: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]}
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
		for _, a := range containerArgs(t, get(d)) {
			if strings.HasPrefix(a, "--metrics-secure") {
				t.Errorf("%s runs %s by default, want the binary's default (secure)", d, a)
			}
		}
	}
	for _, cr := range []string{"ClusterRole /karpx-controller", "ClusterRole /karpx-webhook"} {
		if got := authRules(t, get(cr)); !slices.Equal(got, []string{"subjectaccessreviews:create", "tokenreviews:create"}) {
			t.Errorf("%s grants %v on reviews, want create on tokenreviews and subjectaccessreviews", cr, got)
		}
	}
	reader := get("ClusterRole /karpx-metrics-reader")
	raw, _, _ := unstructured.NestedSlice(reader.Object, "rules")
	if len(raw) != 1 {
		t.Fatalf("karpx-metrics-reader rules %v", raw)
	}
	r := raw[0].(map[string]any)
	if !slices.Equal(asSlice(r["nonResourceURLs"]), []any{"/metrics"}) || !slices.Equal(asSlice(r["verbs"]), []any{"get"}) || r["resources"] != nil {
		t.Errorf("karpx-metrics-reader rule %v, want get on nonResourceURLs /metrics only", r)
	}
	rb := get("ClusterRoleBinding /karpx-metrics-reader")
	if s := asSlice(rb.Object["subjects"]); len(s) != 1 || s[0].(map[string]any)["name"] != "prometheus" {
		t.Errorf("karpx-metrics-reader bound to %v, want metrics.readers", s)
	}
	for _, sm := range []string{"ServiceMonitor karpx/karpx-controller", "ServiceMonitor karpx-system/karpx-webhook"} {
		ep, _, _ := unstructured.NestedSlice(get(sm).Object, "spec", "endpoints")
		e := ep[0].(map[string]any)
		tls, _ := e["tlsConfig"].(map[string]any)
		if e["scheme"] != "https" || e["port"] != "metrics" || e["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" || tls["insecureSkipVerify"] != true || e["interval"] != "15s" {
			t.Errorf("%s endpoint %v, want https on port metrics with the ServiceAccount token (and endpointConfig kept)", sm, e)
		}
	}

	off := render(t, "karpx", "karpx", valuesOf(t, "metrics: {secure: false}\nserviceMonitor: {enabled: true}\n"))
	for k, o := range off {
		switch o.GetKind() {
		case "Deployment":
			if !slices.Contains(containerArgs(t, o), "--metrics-secure=false") {
				t.Errorf("metrics.secure=false: %s args %v lack --metrics-secure=false", k, containerArgs(t, o))
			}
		case "ClusterRole":
			if got := authRules(t, o); len(got) > 0 || o.GetName() == "karpx-metrics-reader" {
				t.Errorf("metrics.secure=false renders %s (review rules %v)", k, got)
			}
		case "ServiceMonitor":
			ep, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
			if s := ep[0].(map[string]any)["scheme"]; s != nil {
				t.Errorf("metrics.secure=false: %s scheme %v, want plain http", k, s)
			}
		}
	}
}

// TestChartStatusPort: the controller serves its status endpoints on a
// port of their own, named status in the container and the Service, at
// the binary's default (8082, no flag) or controller.status.port (then
// --status-bind-address); Role karpx-throttle-reader grants the service
// proxy to that port only, which kubectl karpx's default --port names.
func TestChartStatusPort(t *testing.T) {
	for _, tc := range []struct {
		values string
		port   float64
		arg    string
	}{
		{"{}", 8082, ""},
		{"controller: {status: {port: 9090}}", 9090, "--status-bind-address=:9090"},
	} {
		objs := render(t, "karpx", "karpx", valuesOf(t, tc.values))
		d := objs["Deployment karpx/karpx-controller"]
		var statusArgs []string
		for _, a := range containerArgs(t, d) {
			if strings.HasPrefix(a, "--status-bind-address") {
				statusArgs = append(statusArgs, a)
			}
		}
		if want := []string{tc.arg}; tc.arg == "" && len(statusArgs) > 0 || tc.arg != "" && !slices.Equal(statusArgs, want) {
			t.Errorf("%s: args %v, want status flag %q", tc.values, statusArgs, tc.arg)
		}
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		ports := map[string]any{}
		for _, p := range asSlice(cs[0].(map[string]any)["ports"]) {
			m := p.(map[string]any)
			ports[m["name"].(string)] = m["containerPort"]
		}
		if toString(ports["status"]) != toString(tc.port) || ports["status"] == ports["metrics"] {
			t.Errorf("%s: container ports %v, want status %v apart from metrics", tc.values, ports, tc.port)
		}
		svc := objs["Service karpx/karpx-controller"]
		svcPorts := map[string]string{}
		for _, p := range asSlice(svc.Object["spec"].(map[string]any)["ports"]) {
			m := p.(map[string]any)
			svcPorts[m["name"].(string)] = toString(m["port"]) + "->" + toString(m["targetPort"])
		}
		if svcPorts["status"] != toString(tc.port)+"->status" {
			t.Errorf("%s: Service ports %v, want status %v->status", tc.values, svcPorts, tc.port)
		}
		role := objs["Role karpx/karpx-throttle-reader"]
		if got := rules(t, role); len(got) != 1 || !slices.Equal(got[0].names, []string{"karpx-controller:" + throttle.DefaultPort}) ||
			!slices.Equal(got[0].resources, []string{"services/proxy"}) || !slices.Equal(got[0].verbs, []string{"get"}) {
			t.Errorf("karpx-throttle-reader rules %+v, want get on services/proxy karpx-controller:%s only", got, throttle.DefaultPort)
		}
	}
}

// TestChartNetworkPolicy renders networkPolicy.enabled: each component's
// pods admit ingress only on their ports, metrics from metricsFrom, the
// controller's status port from statusFrom, the webhook port from
// webhookFrom; off by default. A second render leaves statusFrom empty:
// the status port then admits any source (the API server's address is
// cluster-specific), on that port only.
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
  statusFrom: [{ipBlock: {cidr: 10.1.0.0/16}}]
`))
	want := map[string]map[string]string{
		"NetworkPolicy karpx/karpx-controller": {"8081": "any", "8080": "monitoring", "8082": "10.1.0.0/16"},
		"NetworkPolicy karpx/karpx-webhook":    {"8081": "any", "9443": "10.0.0.0/16", "8080": "monitoring"},
	}
	checkNetworkPolicies(t, objs, want)
	anyStatus := render(t, "karpx", "karpx", valuesOf(t, "networkPolicy: {enabled: true}\n"))
	checkNetworkPolicies(t, anyStatus, map[string]map[string]string{
		"NetworkPolicy karpx/karpx-controller": {"8081": "any", "8082": "any"},
	})
}

// checkNetworkPolicies checks that each NetworkPolicy of want selects a
// rendered Deployment's pods, is ingress only and admits exactly the
// ports of want (port → "any", an ipBlock CIDR or a namespace name).
func checkNetworkPolicies(t *testing.T, objs map[string]*unstructured.Unstructured, want map[string]map[string]string) {
	t.Helper()
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
