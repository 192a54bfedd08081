package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/karpx/karpx/charts"
	"github.com/karpx/karpx/test/cluster"
)

// certManagerCRDs are minimal stand-ins for cert-manager's Issuer and
// Certificate CRDs (group cert-manager.io, version v1, any spec): no
// cert-manager module or manifest is available offline, so the
// cert-manager case checks that the API server accepts and stores the
// chart's Issuer and Certificate under those kinds, not cert-manager's own
// validation (and no cert-manager controller issues the certificate).
var certManagerCRDs = certManagerCRD("Issuer", "issuers") + "---\n" + certManagerCRD("Certificate", "certificates")

// certManagerCRD is a minimal CRD for cert-manager.io/v1 kind (plural
// plural): namespaced, any spec and status.
func certManagerCRD(kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.cert-manager.io}
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: %[1]s, listKind: %[1]sList, plural: %[2]s, singular: %[3]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, kind, plural, strings.ToLower(kind))
}

// valuesCase is one entry of the values matrix: the karpx chart rendered
// in namespace with values, and what must then exist in the cluster
// (want: kubectl get ARGS -o jsonpath=PATH → value; "" means absent).
type valuesCase struct {
	name, namespace string
	values          map[string]any
	want            []jsonpathWant
}

// jsonpathWant is one check of a valuesCase.
type jsonpathWant struct {
	args  []string // kubectl get arguments, e.g. {"serviceaccount", "karpx", "-n", "karpx"}
	path  string   // jsonpath, e.g. "{.metadata.annotations}"
	value string   // wanted output; "" with path "" means the object must not exist
}

// helmValuesMatrix returns the matrix's cases.
func helmValuesMatrix() []valuesCase {
	const arn = "arn:aws:iam::111122223333:role/KarpxController"
	return []valuesCase{
		{name: "defaults", namespace: "karpx", want: []jsonpathWant{
			{[]string{"deployment", "karpx-controller", "-n", "karpx"}, "{.spec.replicas}", "2"},
			{[]string{"deployment", "karpx-webhook", "-n", "karpx"}, "{.spec.template.spec.serviceAccountName}", "karpx-webhook"},
			{[]string{"validatingwebhookconfiguration", "karpx-webhook"}, "{.webhooks[0].clientConfig.service.namespace}", "karpx"},
			{[]string{"secret", "karpx-webhook-cert", "-n", "karpx"}, "{.type}", "Opaque"},
			{[]string{"poddisruptionbudget", "karpx-webhook", "-n", "karpx"}, "{.spec.minAvailable}", "1"},
			{[]string{"poddisruptionbudget", "karpx-controller", "-n", "karpx"}, "{.spec.maxUnavailable}", "1"},
			{[]string{"deployment", "karpx-controller", "-n", "karpx"},
				"{.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key}", "karpenter.sh/nodepool"},
		}},
		{name: "irsa", namespace: "karpx", values: map[string]any{
			"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": arn}},
		}, want: []jsonpathWant{
			{[]string{"serviceaccount", "karpx", "-n", "karpx"}, `{.metadata.annotations.eks\.amazonaws\.com/role-arn}`, arn},
			{[]string{"clusterrolebinding", "karpx-controller"}, "{.subjects[0].name}", "karpx"},
		}},
		{name: "replicas-3-no-pdb", namespace: "karpx", values: map[string]any{
			"replicas": 3, "podDisruptionBudget": map[string]any{"enabled": false},
		}, want: []jsonpathWant{
			{[]string{"deployment", "karpx-controller", "-n", "karpx"}, "{.spec.replicas}", "3"},
			{[]string{"poddisruptionbudget", "karpx-controller", "-n", "karpx", "--ignore-not-found"}, "", ""},
		}},
		{name: "custom-namespace", namespace: "kube-autoscaling", want: []jsonpathWant{
			{[]string{"deployment", "karpx-controller", "-n", "kube-autoscaling"}, "{.spec.template.spec.containers[0].args[0]}", "--leader-election-namespace=kube-autoscaling"},
			{[]string{"clusterrolebinding", "karpx-controller"}, "{.subjects[0].namespace}", "kube-autoscaling"},
			{[]string{"clusterrolebinding", "karpx-webhook"}, "{.subjects[0].namespace}", "kube-autoscaling"},
			{[]string{"mutatingwebhookconfiguration", "karpx-webhook"}, "{.webhooks[0].clientConfig.service.namespace}", "kube-autoscaling"},
			{[]string{"deployment", "karpx-controller", "-n", "karpx", "--ignore-not-found"}, "", ""},
		}},
		{name: "webhook-disabled", namespace: "karpx", values: map[string]any{
			"webhook": map[string]any{"enabled": false},
		}, want: []jsonpathWant{
			{[]string{"deployment", "karpx-controller", "-n", "karpx"}, "{.spec.replicas}", "2"},
			{[]string{"deployment", "karpx-webhook", "-n", "karpx", "--ignore-not-found"}, "", ""},
			{[]string{"validatingwebhookconfiguration", "karpx-webhook", "--ignore-not-found"}, "", ""},
			{[]string{"mutatingwebhookconfiguration", "karpx-webhook", "--ignore-not-found"}, "", ""},
			{[]string{"clusterrole", "karpx-webhook", "--ignore-not-found"}, "", ""},
		}},
		{name: "cert-manager", namespace: "karpx", values: map[string]any{
			"webhook": map[string]any{"certificates": map[string]any{"mode": "cert-manager"}},
		}, want: []jsonpathWant{
			{[]string{"certificate", "karpx-webhook", "-n", "karpx"}, "{.spec.secretName}", "karpx-webhook-cert"},
			{[]string{"issuer", "karpx-webhook-selfsigned", "-n", "karpx"}, "{.spec}", `{"selfSigned":{}}`},
			{[]string{"validatingwebhookconfiguration", "karpx-webhook"}, `{.metadata.annotations.cert-manager\.io/inject-ca-from}`, "karpx/karpx-webhook"},
			{[]string{"secret", "karpx-webhook-cert", "-n", "karpx", "--ignore-not-found"}, "", ""},
		}},
	}
}

// TestHelmValuesMatrix: for each case of helmValuesMatrix, the karpx chart
// is rendered with Helm's SDK and every object is server-side applied to a
// real API server (not a dry run), then read back: every rendered object
// exists, and the case's own checks hold (IRSA annotation, PDB, namespace
// in every reference, no webhook object when it is disabled, cert-manager
// Issuer and Certificate). The objects are deleted before the next case.
// karpx-crd is rendered and applied first (its CRDs must be established).
// One line per case: objects rendered, applied and read back.
func TestHelmValuesMatrix(t *testing.T) {
	runInParallel(t)
	c := cluster.StartForTest(t)
	ctx := context.Background()
	apply := func(yaml string) error {
		_, err := c.Kubectl(ctx, []byte(yaml), "apply", "--server-side", "--force-conflicts", "--field-manager=karpx-helm-matrix", "-f", "-")
		return err
	}
	present := func(yaml string) int {
		out, err := c.Kubectl(ctx, []byte(yaml), "get", "-f", "-", "-o", "name")
		if err != nil {
			t.Errorf("reading the applied objects back: %v", err)
		}
		return strings.Count(out, "\n")
	}

	crdDocs := renderDocs(t, repoChartDir(t, "karpx-crd"), "karpx-crd", "karpx", nil)
	crds := strings.Join(crdDocs, "\n---\n")
	if err := apply(crds); err != nil {
		t.Fatalf("applying karpx-crd: %v", err)
	}
	if err := waitCRDs(ctx, c); err != nil {
		t.Fatal(err)
	}
	scenarioLogf(t, "helm values matrix karpx-crd: rendered=%d applied=%d present=%d", len(crdDocs), len(crdDocs), present(crds))
	if err := apply(certManagerCRDs); err != nil {
		t.Fatalf("applying the cert-manager stand-in CRDs: %v", err)
	}
	if err := waitCRDs(ctx, c); err != nil {
		t.Fatal(err)
	}

	for _, vc := range helmValuesMatrix() {
		docs := renderDocs(t, repoChartDir(t, "karpx"), "karpx", vc.namespace, vc.values)
		all := strings.Join(docs, "\n---\n")
		ns := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", vc.namespace)
		if err := apply(ns); err != nil {
			t.Fatal(err)
		}
		if err := apply(all); err != nil {
			t.Errorf("%s: server-side apply: %v", vc.name, err)
			continue
		}
		got := present(all)
		if got != len(docs) {
			t.Errorf("%s: %d of %d rendered objects read back", vc.name, got, len(docs))
		}
		failed := 0
		for _, w := range vc.want {
			args := append([]string{"get"}, w.args...)
			if w.path == "" {
				args = append(args, "-o", "name")
			} else {
				args = append(args, "-o", "jsonpath="+w.path)
			}
			out, err := c.Kubectl(ctx, nil, args...)
			if err != nil || strings.TrimSpace(out) != w.value {
				failed++
				t.Errorf("%s: kubectl %s: got %q (%v), want %q", vc.name, strings.Join(args, " "), strings.TrimSpace(out), err, w.value)
			}
		}
		scenarioLogf(t, "helm values matrix %s: namespace=%s rendered=%d applied=%d present=%d checks=%d failed=%d",
			vc.name, vc.namespace, len(docs), len(docs), got, len(vc.want), failed)
		if _, err := c.Kubectl(ctx, []byte(all), "delete", "--ignore-not-found", "--wait=true", "-f", "-"); err != nil {
			t.Fatalf("%s: deleting the case's objects: %v", vc.name, err)
		}
	}
}

// renderDocs renders the chart in dir as release in namespace with values
// (Helm's SDK, schema checked) and returns its objects' YAML documents.
func renderDocs(t *testing.T, dir, release, namespace string, values map[string]any) []string {
	t.Helper()
	ms, err := charts.Render(loadChart(t, dir), release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, m := range ms {
		d, err := splitYAML(m.YAML)
		if err != nil {
			t.Fatalf("%s: %v", m.Template, err)
		}
		docs = append(docs, d...)
	}
	return docs
}
