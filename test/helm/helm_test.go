package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/karpx/karpx/charts"
)

// root is the repository root (this package is test/helm).
const root = "../.."

// chartDirs are the charts under charts/.
var chartDirs = []string{"karpx", "karpx-crd"}

func loadChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	c, err := charts.Load(filepath.Join(root, "charts", name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objects decodes every YAML document of the rendered manifests, keyed
// "Kind namespace/name".
func objects(t *testing.T, ms []charts.Manifest) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, m := range ms {
		for key, obj := range decode(t, m.Template, m.YAML) {
			if _, dup := out[key]; dup {
				t.Errorf("%s: %s rendered twice", m.Template, key)
			}
			out[key] = obj
		}
	}
	return out
}

func decode(t *testing.T, source, text string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("%s: %v", source, err)
		}
		if m == nil {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		out[key(obj)] = obj
	}
}

func key(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}

func render(t *testing.T, name, namespace string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	ms, err := charts.Render(loadChart(t, name), name, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, ms)
}

// TestChartLintStrict runs Helm's linter (what `helm lint --strict` runs)
// on both charts, with their default values: any message above INFO fails.
func TestChartLintStrict(t *testing.T) {
	for _, name := range chartDirs {
		dir := filepath.Join(root, "charts", name)
		linter := lint.AllWithKubeVersion(dir, nil, "karpx", nil)
		for _, msg := range linter.Messages {
			if msg.Severity > support.InfoSev {
				t.Errorf("helm lint --strict charts/%s: %s", name, msg)
			} else {
				t.Logf("helm lint charts/%s: %s", name, msg)
			}
		}
	}
}

// TestChartLintFailsOnBrokenTemplate is TestChartLintStrict's control: a
// copy of the karpx chart with a template that does not parse fails lint.
func TestChartLintFailsOnBrokenTemplate(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "charts", "karpx"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "broken.yaml"), []byte("{{ .Values.nope "), 0o644); err != nil {
		t.Fatal(err)
	}
	linter := lint.AllWithKubeVersion(dir, nil, "karpx", nil)
	if linter.HighestSeverity < support.ErrorSev {
		t.Errorf("lint of a chart with an unparsable template: highest severity %d, want an error; messages %v", linter.HighestSeverity, linter.Messages)
	}
}

// releaseTag is a release version: the chart's default image tag.
var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// TestChartRendersDefaults renders charts/karpx with its default values
// into namespace kube-system and checks what an operator relies on: the
// images are at the chart's appVersion (a release, never latest), every
// namespaced object is in the release namespace, the webhook configurations
// call the webhook Service there, and no ServiceMonitor or cert-manager
// object appears unless asked for.
func TestChartRendersDefaults(t *testing.T) {
	c := loadChart(t, "karpx")
	if !releaseTag.MatchString(c.Metadata.AppVersion) {
		t.Fatalf("charts/karpx appVersion %q is not a release tag vX.Y.Z", c.Metadata.AppVersion)
	}
	objs := render(t, "karpx", "kube-system", nil)
	want := []string{
		"Deployment kube-system/karpx-controller", "Deployment kube-system/karpx-webhook",
		"ServiceAccount kube-system/karpx", "ServiceAccount kube-system/karpx-webhook",
		"ClusterRole /karpx-controller", "ClusterRoleBinding /karpx-controller", "ClusterRole /karpx-webhook",
		"Service kube-system/karpx-controller", "Service kube-system/karpx-webhook",
		"PodDisruptionBudget kube-system/karpx-webhook", "PodDisruptionBudget kube-system/karpx-controller", "Secret kube-system/karpx-webhook-cert",
		"MutatingWebhookConfiguration /karpx-webhook", "ValidatingWebhookConfiguration /karpx-webhook",
	}
	for _, k := range want {
		if objs[k] == nil {
			t.Errorf("default render lacks %s; it has %v", k, sortedKeys(objs))
		}
	}
	for k, obj := range objs {
		if ns := obj.GetNamespace(); ns != "" && ns != "kube-system" {
			t.Errorf("%s: namespace %q, want the release's kube-system", k, ns)
		}
		switch obj.GetKind() {
		case "ServiceMonitor", "Certificate", "Issuer":
			t.Errorf("%s rendered with default values", k)
		case "Deployment":
			for _, img := range images(t, obj) {
				if want := ":" + c.Metadata.AppVersion; !strings.HasSuffix(img, want) {
					t.Errorf("%s: image %s, want tag %s (appVersion)", k, img, c.Metadata.AppVersion)
				}
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
			for _, h := range hooks {
				ns, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace")
				if ns != "kube-system" {
					t.Errorf("%s: webhook calls a Service in %q, want kube-system", k, ns)
				}
			}
		}
	}
}

func images(t *testing.T, deploy *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, c := range containers(t, deploy) {
		out = append(out, c["image"].(string))
	}
	return out
}

// containers returns deploy's pod template containers.
func containers(t *testing.T, deploy *unstructured.Unstructured) []map[string]any {
	t.Helper()
	list, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, 0, len(list))
	for _, c := range list {
		out = append(out, c.(map[string]any))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestChartSchemaRejectsBadValues checks that values.schema.json rejects
// an unknown (mistyped) key and a value of the wrong type or outside its
// set, each with a message naming the value, and accepts the same values
// spelled right (the control).
func TestChartSchemaRejectsBadValues(t *testing.T) {
	c := loadChart(t, "karpx")
	cases := []struct {
		name   string
		values string
		want   string // in the error
	}{
		{"unknown top-level key", "replica: 3", "'replica'"},
		{"unknown nested key", "settings: {clusterNmae: prod}", "'clusterNmae'"},
		{"unknown serviceAccount key", "serviceAccount: {annotation: {a: b}}", "'annotation'"},
		{"mistyped integer", "webhook: {replicas: two}", "/webhook/replicas"},
		{"mistyped boolean", "webhook: {enabled: \"yes\"}", "/webhook/enabled"},
		{"certificate mode", "webhook: {certificates: {mode: vault}}", "/webhook/certificates/mode"},
		{"latest tag", "controller: {image: {tag: latest}}", "/controller/image/tag"},
		{"bad duration", "settings: {batchIdleDuration: 1 second}", "/settings/batchIdleDuration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if err := sigsyaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			_, err := charts.Render(c, "karpx", "karpx", values)
			if err == nil {
				t.Fatalf("values %s accepted, want a schema error", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("values %s: error %q does not name %s", tc.values, err, tc.want)
			}
		})
	}
	good := "replicas: 3\nsettings: {clusterName: prod, batchIdleDuration: 2s}\nserviceAccount: {annotations: {eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/karpx}}\nwebhook: {replicas: 3, enabled: true, certificates: {mode: cert-manager}}\ncontroller: {image: {tag: v1.2.3}}\n"
	values := map[string]any{}
	if err := sigsyaml.Unmarshal([]byte(good), &values); err != nil {
		t.Fatal(err)
	}
	if _, err := charts.Render(c, "karpx", "karpx", values); err != nil {
		t.Errorf("well-formed values rejected: %v", err)
	}
}

// TestChartSchemaCoversValues checks values.schema.json describes every
// key of values.yaml (so the generated values table has no hole) and gives
// each a description.
func TestChartSchemaCoversValues(t *testing.T) {
	c := loadChart(t, "karpx")
	schema := map[string]any{}
	if err := sigsyaml.Unmarshal(c.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, values map[string]any, schema map[string]any)
	walk = func(path string, values map[string]any, schema map[string]any) {
		props, _ := schema["properties"].(map[string]any)
		for k, v := range values {
			p := strings.TrimPrefix(path+"."+k, ".")
			s, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml %s: not in values.schema.json", p)
				continue
			}
			if d, _ := s["description"].(string); d == "" {
				t.Errorf("values.schema.json %s: no description", p)
			}
			if sub, ok := v.(map[string]any); ok && s["properties"] != nil {
				walk(p, sub, s)
			}
		}
	}
	walk("", c.Values, schema)
}

// TestChartManifestsEqualKustomize checks the single source of truth:
// `kubectl apply -k manifests/controller` and `-k manifests/webhook` (and
// the webhook with the cert-manager component) apply exactly the objects
// charts/karpx renders with hack/chartmanifests/values.yaml in namespace
// karpx (cert-manager mode for the component), apart from the Namespaces
// kustomize also creates. It fails when a kustomization.yaml misses a
// generated file or manifests/ was edited by hand.
func TestChartManifestsEqualKustomize(t *testing.T) {
	values := map[string]any{}
	data, err := os.ReadFile(filepath.Join(root, "hack", "chartmanifests", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	chartObjs := render(t, "karpx", "karpx", values)
	kustObjs := map[string]*unstructured.Unstructured{}
	for _, dir := range []string{"controller", "webhook"} {
		for k, obj := range kustomize(t, filepath.Join(root, "manifests", dir)) {
			if obj.GetKind() != "Namespace" {
				kustObjs[k] = obj
			}
		}
	}
	compare(t, "manifests/{controller,webhook}", kustObjs, chartObjs)

	// The cert-manager component on top of manifests/webhook.
	webhook, _ := values["webhook"].(map[string]any)
	webhook["certificates"] = map[string]any{"mode": "cert-manager"}
	chartCM := render(t, "karpx", "karpx", values)
	for k, obj := range chartCM {
		// The webhook's objects: in its namespace, cluster-scoped (but the
		// controller's, and ClusterRole karpx-metrics-reader, which
		// manifests/controller holds), and its startup-taint Roles in the
		// namespaces it detects agents in.
		if obj.GetNamespace() != "karpx-system" && obj.GetName() != "karpx-webhook-startup-taints" &&
			!slices.Contains([]string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding"}, obj.GetKind()) ||
			strings.HasSuffix(k, "/karpx-controller") || strings.HasSuffix(k, "/karpx-metrics-reader") {
			delete(chartCM, k)
		}
	}
	overlay := t.TempDir()
	abs, err := filepath.Abs(filepath.Join(root, "manifests", "webhook"))
	if err != nil {
		t.Fatal(err)
	}
	kz := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n", "webhook", "webhook/cert-manager")
	if err := os.CopyFS(filepath.Join(overlay, "webhook"), os.DirFS(abs)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kz), 0o644); err != nil {
		t.Fatal(err)
	}
	kustCM := kustomize(t, overlay)
	delete(kustCM, "Namespace /karpx-system")
	compare(t, "manifests/webhook with components: [cert-manager]", kustCM, chartCM)
}

// kustomize builds dir as `kubectl kustomize` does.
func kustomize(t *testing.T, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	data, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, dir, string(data))
}

// compare reports the objects only one side has and those that differ
// (as JSON: field order and YAML style do not count).
func compare(t *testing.T, what string, kust, chart map[string]*unstructured.Unstructured) {
	t.Helper()
	for _, k := range sortedKeys(kust) {
		c, ok := chart[k]
		if !ok {
			t.Errorf("%s has %s, the chart does not render it", what, k)
			continue
		}
		a, _ := sigsyaml.Marshal(kust[k].Object)
		b, _ := sigsyaml.Marshal(c.Object)
		if string(a) != string(b) {
			t.Errorf("%s: %s differs from the chart's:\n--- kustomize\n%s\n--- chart\n%s", what, k, a, b)
		}
	}
	for _, k := range sortedKeys(chart) {
		if _, ok := kust[k]; !ok {
			t.Errorf("the chart renders %s, %s lacks it (a generated file missing from kustomization.yaml?)", k, what)
		}
	}
}

// TestChartServiceMonitors renders charts/karpx with serviceMonitor.enabled
// (the webhook in its own namespace, extra labels and an interval) and
// follows each ServiceMonitor to what Prometheus would scrape: a Service in
// the ServiceMonitor's namespace matching its selector, with the endpoint's
// port, whose targetPort is a container port of the Deployment behind it.
// The controller's and the webhook's metrics must both be covered; with
// webhook.enabled false only the controller's ServiceMonitor renders.
func TestChartServiceMonitors(t *testing.T) {
	values := map[string]any{}
	text := "serviceMonitor: {enabled: true, additionalLabels: {release: prom}, endpointConfig: {interval: 15s}}\nwebhook: {namespace: karpx-system}\n"
	if err := sigsyaml.Unmarshal([]byte(text), &values); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "karpx", "karpx", values)
	for _, target := range []string{"karpx/karpx-controller", "karpx-system/karpx-webhook"} {
		sm := objs["ServiceMonitor "+target]
		if sm == nil {
			t.Errorf("no ServiceMonitor %s; rendered %v", target, sortedKeys(objs))
			continue
		}
		if got := sm.GetLabels()["release"]; got != "prom" {
			t.Errorf("ServiceMonitor %s: label release=%q, want prom (serviceMonitor.additionalLabels)", target, got)
		}
		scraped(t, objs, sm)
	}

	values["webhook"] = map[string]any{"enabled": false}
	var monitors []string
	for k, obj := range render(t, "karpx", "karpx", values) {
		if obj.GetKind() == "ServiceMonitor" {
			monitors = append(monitors, k)
		}
	}
	if !slices.Equal(monitors, []string{"ServiceMonitor karpx/karpx-controller"}) {
		t.Errorf("webhook.enabled false: ServiceMonitors %v, want only karpx/karpx-controller", monitors)
	}
}

// scraped checks that sm's single endpoint reaches a container port: its
// selector matches a Service in sm's namespace having the endpoint's port,
// and that port's targetPort names a port of a Deployment the Service
// selects. It also checks the endpoint keeps serviceMonitor.endpointConfig.
func scraped(t *testing.T, objs map[string]*unstructured.Unstructured, sm *unstructured.Unstructured) {
	t.Helper()
	ns := sm.GetNamespace()
	if names, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames"); !slices.Equal(names, []string{ns}) {
		t.Errorf("%s: namespaceSelector %v, want [%s]", key(sm), names, ns)
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("%s: %d endpoints, want 1", key(sm), len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	if ep["interval"] != "15s" || ep["path"] != "/metrics" {
		t.Errorf("%s: endpoint %v, want path /metrics and interval 15s", key(sm), ep)
	}
	for _, svc := range objs {
		if svc.GetKind() != "Service" || svc.GetNamespace() != ns || !matches(selector, svc.GetLabels()) {
			continue
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, p := range ports {
			p := p.(map[string]any)
			if p["name"] != ep["port"] {
				continue
			}
			podSelector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
			for _, d := range objs {
				podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
				if d.GetKind() == "Deployment" && d.GetNamespace() == ns && matches(podSelector, podLabels) && slices.Contains(containerPorts(t, d), p["targetPort"].(string)) {
					return
				}
			}
		}
	}
	t.Errorf("%s: no Service in %s matching %v has port %v targeting a Deployment's container port", key(sm), ns, selector, ep["port"])
}

// matches reports whether labels has every key and value of selector (a
// non-empty matchLabels).
func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// containerPorts returns the names of deploy's container ports.
func containerPorts(t *testing.T, deploy *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, c := range containers(t, deploy) {
		ports, _, _ := unstructured.NestedSlice(c, "ports")
		for _, p := range ports {
			if name, ok := p.(map[string]any)["name"].(string); ok {
				out = append(out, name)
			}
		}
	}
	return out
}
