package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/charts"
	"github.com/karpx/karpx/test/cluster"
)

// This file holds what the Helm e2e tests share (helm_*_test.go): Helm's
// Go SDK run as an operator runs the helm CLI (admin kubeconfig, release
// records in Secrets), the chart values that fit the e2e harness, and the
// post-renderer that points the webhook configurations at the test's
// loopback stand-in for Service karpx-webhook.
//
// kwok fakes pods, so the chart's Deployments do not run karpx: their pods
// run (as kwok fakes) on a tainted "system" Node the test creates, as
// Karpenter's own pods run on a managed node group, and the harness runs
// the real binaries as local processes with the identities of the
// ServiceAccounts the chart created (tokens from the TokenRequest API).

// helmNamespace is the namespace the e2e tests install both charts in
// (the controller's namespace of manifests/, so its leader-election Lease
// is leaderLease).
const helmNamespace = "karpx"

// Chart ServiceAccounts (the chart's defaults, in helmNamespace) and the
// users they authenticate as.
const (
	chartControllerSA   = "karpx"
	chartWebhookSA      = "karpx-webhook"
	chartControllerUser = "system:serviceaccount:" + helmNamespace + ":" + chartControllerSA
	chartWebhookUser    = "system:serviceaccount:" + helmNamespace + ":" + chartWebhookSA
)

// systemNodeLabel labels and taints the Node the chart's pods run on
// (helmSystemNode): no workload pod lands there, and the autoscaler does
// not provision nodes for the chart's pods.
const systemNodeLabel = "karpx.io/e2e-system"

// chartDir returns the path of chart name ("karpx", "karpx-crd") in the
// working tree.
func (e *env) chartDir(name string) string { return filepath.Join(e.root, "charts", name) }

// repoRoot returns the repository's root (bin/'s parent) before an env
// exists.
func repoRoot(t *testing.T) string {
	t.Helper()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(bin)
}

// repoChartDir returns the path of chart name in the working tree.
func repoChartDir(t *testing.T, name string) string {
	return filepath.Join(repoRoot(t), "charts", name)
}

// loadChart loads the chart in dir, failing t when it does not parse.
func loadChart(t *testing.T, dir string) *chart.Chart {
	t.Helper()
	c, err := charts.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// helmValues are the karpx chart values of the e2e installs: the cluster
// name, and the pods on the system Node (helmSystemNode). Everything else
// is the chart's default.
func helmValues(clusterName string) map[string]any {
	return map[string]any{
		"settings":     map[string]any{"clusterName": clusterName},
		"nodeSelector": map[string]any{systemNodeLabel: "true"},
		"tolerations":  []any{map[string]any{"key": systemNodeLabel, "operator": "Exists", "effect": "NoSchedule"}},
	}
}

// helmClient runs Helm actions in namespace as `helm --kubeconfig ADMIN
// --namespace NAMESPACE` does: release records in Secrets of namespace.
type helmClient struct {
	t         *testing.T
	cfg       *action.Configuration
	namespace string
	// post rewrites every rendered manifest (may be nil): see
	// webhookURLRenderer.
	post *webhookURLRenderer
}

// newHelmClient returns a helmClient for c's admin kubeconfig.
func newHelmClient(t *testing.T, c *cluster.Cluster, namespace string, post *webhookURLRenderer) *helmClient {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.Kubeconfig
	flags.Namespace = &namespace
	cfg := new(action.Configuration)
	// Helm's debug log (every resource it waits for) is left out.
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		t.Fatalf("helm: %v", err)
	}
	return &helmClient{t: t, cfg: cfg, namespace: namespace, post: post}
}

// install runs `helm install name chart` with values, creating the
// namespace; it fails t with Helm's error.
func (h *helmClient) install(ctx context.Context, name string, ch *chart.Chart, values map[string]any) *release.Release {
	h.t.Helper()
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = name, h.namespace, true
	in.Timeout = 2 * time.Minute
	if h.post != nil {
		in.PostRenderer = h.post
	}
	rel, err := in.RunWithContext(ctx, ch, values)
	if err != nil {
		h.t.Fatalf("helm install %s (chart %s %s): %v", name, ch.Name(), ch.Metadata.Version, err)
	}
	return rel
}

// upgrade runs `helm upgrade name chart` with values.
func (h *helmClient) upgrade(ctx context.Context, name string, ch *chart.Chart, values map[string]any) *release.Release {
	h.t.Helper()
	up := action.NewUpgrade(h.cfg)
	up.Namespace = h.namespace
	up.Timeout = 2 * time.Minute
	if h.post != nil {
		up.PostRenderer = h.post
	}
	rel, err := up.RunWithContext(ctx, name, ch, values)
	if err != nil {
		h.t.Fatalf("helm upgrade %s (chart %s %s): %v", name, ch.Name(), ch.Metadata.Version, err)
	}
	return rel
}

// rollback runs `helm rollback name revision` and returns the release it
// made (a new revision with the old one's manifest).
func (h *helmClient) rollback(name string, revision int) *release.Release {
	h.t.Helper()
	rb := action.NewRollback(h.cfg)
	rb.Version = revision
	rb.Timeout = 2 * time.Minute
	if err := rb.Run(name); err != nil {
		h.t.Fatalf("helm rollback %s %d: %v", name, revision, err)
	}
	rel, err := action.NewGet(h.cfg).Run(name)
	if err != nil {
		h.t.Fatalf("helm get %s: %v", name, err)
	}
	return rel
}

// installCRDChart is an envOptions.crds: `helm install karpx-crd` of ch in
// helmNamespace, then a wait until every CRD is established.
func installCRDChart(t *testing.T, ch *chart.Chart) func(ctx context.Context, c *cluster.Cluster) error {
	return func(ctx context.Context, c *cluster.Cluster) error {
		newHelmClient(t, c, helmNamespace, nil).install(ctx, "karpx-crd", ch, nil)
		return waitCRDs(ctx, c)
	}
}

// waitCRDs waits until every CRD of c is established.
func waitCRDs(ctx context.Context, c *cluster.Cluster) error {
	return c.WaitEstablished(ctx, "crd", "--all")
}

// helmSystemNode creates the kwok Node the chart's pods run on (labelled
// and tainted systemNodeLabel, 8 CPUs).
func (e *env) helmSystemNode() {
	e.t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "karpx-e2e-system", Labels: map[string]string{systemNodeLabel: "true"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: systemNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	if err := e.kube.Create(e.ctx, node); err != nil {
		e.t.Fatalf("creating the system Node: %v", err)
	}
}

// chartServiceAccountKubeconfig writes a kubeconfig for ServiceAccount
// namespace/name as the chart created it (no RBAC applied by the test):
// a token from the TokenRequest API, valid for an hour. It returns once
// the API server's authorizer grants what the chart's bindings bind
// (cluster.WaitForServiceAccountRBAC), so a process started with it is
// not refused while the authorizer catches up.
func (e *env) chartServiceAccountKubeconfig(namespace, name string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := cluster.WaitForServiceAccountRBAC(ctx, e.cluster.RESTConfig, namespace, name); err != nil {
		e.t.Fatalf("the chart's RBAC for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	cfg, err := cluster.ServiceAccountConfig(ctx, e.cluster.RESTConfig, namespace, name, time.Hour)
	if err != nil {
		e.t.Fatalf("ServiceAccount %s/%s (created by the chart?): %v", namespace, name, err)
	}
	path := filepath.Join(e.t.TempDir(), name+".kubeconfig")
	if err := cluster.WriteKubeconfig(cfg, path); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// webhookURLRenderer is a Helm post-renderer: it points every webhook of
// the rendered Mutating- and ValidatingWebhookConfigurations at url (the
// test's stand-in for Service karpx-webhook, webhookService) with the
// service's path, and sets caBundle to the test CA that signed the
// replicas' serving certificate, as envtest does for a local webhook.
// Helm records the post-rendered manifest, so upgrades and rollbacks keep
// the rewrite.
type webhookURLRenderer struct {
	url      string // https://127.0.0.1:PORT
	caBundle []byte // PEM
	// rewritten counts the webhooks rewritten by the last Run.
	rewritten int
}

// Run implements postrender.PostRenderer.
func (r *webhookURLRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	docs, err := splitYAML(in.String())
	if err != nil {
		return nil, err
	}
	r.rewritten = 0
	var out bytes.Buffer
	for _, doc := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("post-render: %w", err)
		}
		if kind, _ := obj["kind"].(string); kind == "MutatingWebhookConfiguration" || kind == "ValidatingWebhookConfiguration" {
			webhooks, _ := obj["webhooks"].([]any)
			for _, w := range webhooks {
				w := w.(map[string]any)
				cc, _ := w["clientConfig"].(map[string]any)
				svc, _ := cc["service"].(map[string]any)
				path, _ := svc["path"].(string)
				w["clientConfig"] = map[string]any{"url": r.url + path, "caBundle": base64.StdEncoding.EncodeToString(r.caBundle)}
				r.rewritten++
			}
			data, err := yaml.Marshal(obj)
			if err != nil {
				return nil, err
			}
			doc = string(data)
		}
		out.WriteString("---\n")
		out.WriteString(doc)
		out.WriteString("\n")
	}
	return &out, nil
}

// splitYAML splits a multi-document YAML stream into its documents,
// leaving out those that hold only comments or whitespace.
func splitYAML(s string) ([]string, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	var docs []string
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if len(obj) > 0 {
			// The reader leaves a leading separator on the first document.
			docs = append(docs, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(doc)), "---")))
		}
	}
}

// TestHelmWebhookURLRenderer: the post-renderer rewrites the four
// webhooks of the karpx chart's default render (mutating startup-taints,
// validating ec2nodeclasses, nodepools and nodeoverlays) to the stand-in's URL with the
// service's path and the test CA, drops their service reference, and
// leaves every other object as rendered. Needs no control plane.
func TestHelmWebhookURLRenderer(t *testing.T) {
	docs := renderDocs(t, repoChartDir(t, "karpx"), "karpx", helmNamespace, nil)
	r := &webhookURLRenderer{url: "https://127.0.0.1:9", caBundle: []byte("test CA")}
	out, err := r.Run(bytes.NewBufferString(strings.Join(docs, "\n---\n")))
	if err != nil {
		t.Fatal(err)
	}
	if r.rewritten != 4 {
		t.Errorf("rewrote %d webhooks, want 4", r.rewritten)
	}
	got, err := splitYAML(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(docs) {
		t.Fatalf("%d objects after post-rendering, want the %d rendered", len(got), len(docs))
	}
	urls := map[string]string{}
	for i, doc := range got {
		var obj struct {
			Kind     string `json:"kind"`
			Webhooks []struct {
				Name         string `json:"name"`
				ClientConfig struct {
					URL      string         `json:"url"`
					CABundle string         `json:"caBundle"`
					Service  map[string]any `json:"service"`
				} `json:"clientConfig"`
			} `json:"webhooks"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(obj.Kind, "WebhookConfiguration") {
			if doc != docs[i] {
				t.Errorf("%s changed by the post-renderer:\n%s\nwant\n%s", obj.Kind, doc, docs[i])
			}
			continue
		}
		for _, w := range obj.Webhooks {
			urls[w.Name] = w.ClientConfig.URL
			if w.ClientConfig.Service != nil || w.ClientConfig.CABundle != base64.StdEncoding.EncodeToString([]byte("test CA")) {
				t.Errorf("webhook %s: clientConfig %+v, want the URL and the test CA only", w.Name, w.ClientConfig)
			}
		}
	}
	want := map[string]string{
		"startup-taints.nodepools.karpx.io": "https://127.0.0.1:9/mutate-karpenter-sh-v1-nodepool",
		"ec2nodeclasses.karpx.io":           "https://127.0.0.1:9/validate-karpenter-k8s-aws-v1-ec2nodeclass",
		"nodepools.karpx.io":                "https://127.0.0.1:9/validate-karpenter-sh-v1-nodepool",
		"nodeoverlays.karpx.io":             "https://127.0.0.1:9/validate-karpenter-sh-v1alpha1-nodeoverlay",
	}
	for name, url := range want {
		if urls[name] != url {
			t.Errorf("webhook %s: URL %q, want %q", name, urls[name], url)
		}
	}
}
