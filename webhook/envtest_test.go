package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/test/cluster"
	"github.com/karpx/karpx/webhook"
)

// The suite runs the webhook against a real kube-apiserver and etcd
// (envtest), with the webhook configurations from manifests/webhook and the
// CRDs of Karpenter (NodePool) and karpx (EC2NodeClass), and drives it with
// the real kubectl. It starts once for all tests in TestMain.
var suite struct {
	skip       string
	root       string
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
	// webhookKubeconfig holds a token of ServiceAccount
	// karpx-system/karpx-webhook, for the karpx-webhook binary.
	webhookKubeconfig string
	kubectl           string
	addr              string // host:port of the webhook server
	certDir           string
	// auditLog is kube-apiserver's audit log of the webhook
	// ServiceAccount's requests (webhookUser).
	auditLog string
}

// webhookUser is the user ServiceAccount karpx-system/karpx-webhook
// authenticates as.
const webhookUser = "system:serviceaccount:" + testNamespace + ":karpx-webhook"

const testNamespace = "karpx-system"

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("go.mod not found above " + file)
		}
		dir = parent
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	suite.root = repoRoot()
	ctrl.SetLogger(logr.Discard())
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "^$" {
		// Benchmarks (go test -run '^$' -bench ...) run without an API
		// server, so that it does not compete for CPU.
		suite.skip = "envtest not started for benchmarks"
		return m.Run()
	}
	bin := filepath.Join(suite.root, "bin")
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			suite.skip = "bin/" + b + " not found: run make controlplane"
			return m.Run()
		}
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		suite.skip = "kubectl not found in PATH"
		return m.Run()
	}
	suite.kubectl = kubectl
	if testing.Verbose() {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}

	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(karpapis.CRDs))
	for _, c := range karpapis.CRDs {
		crds = append(crds, c.DeepCopy())
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDs:                  crds,
		CRDDirectoryPaths:     []string{filepath.Join(suite.root, "manifests", "crds", "karpenter.k8s.aws_ec2nodeclasses.yaml")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(suite.root, "manifests", "webhook", "webhooks.yaml")},
		},
	}
	// The API server's audit log records the webhook ServiceAccount's
	// requests, for the least-privilege check (checkWebhookRBAC).
	auditDir, err := os.MkdirTemp("", "karpx-webhook-audit")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(auditDir)
	policy := filepath.Join(auditDir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(cluster.AuditPolicy(webhookUser)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.auditLog = filepath.Join(auditDir, "audit.log")
	env.ControlPlane.GetAPIServer().Configure().Set("audit-policy-file", policy).Set("audit-log-path", suite.auditLog)
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest: %v\n", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}()
	suite.cfg = cfg

	scheme := clientgoscheme.Scheme
	if err := apisv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := webhook.Options{TaintRulesConfigMap: types.NamespacedName{Namespace: testNamespace, Name: "karpx-webhook-startup-taints"}}
	wio := &env.WebhookInstallOptions
	suite.addr = net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	suite.certDir = wio.LocalServingCertDir
	srv := webhook.NewServer(webhook.ServerOptions{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir})
	// The webhook runs as ServiceAccount karpx-system/karpx-webhook with the
	// RBAC of manifests/webhook, as in a cluster: a missing permission
	// fails the suite.
	saCfg, err := webhookServiceAccount(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(saCfg, ctrl.Options{
		Scheme:         scheme,
		Metrics:        metricsserver.Options{BindAddress: "0"},
		Cache:          webhook.CacheOptions(opts),
		LeaderElection: false,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	webhook.Register(srv, mgr.GetCache(), opts)
	if err := mgr.Add(srv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := mgr.Add(webhook.WarmUp(mgr.GetCache(), opts)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	}()
	if err := waitTLS(suite.addr, 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.client, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := suite.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "karpx-webhook-envtest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	suite.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cfg, suite.kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.webhookKubeconfig = filepath.Join(dir, "karpx-webhook.kubeconfig")
	if err := cluster.WriteKubeconfig(saCfg, suite.webhookKubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func waitTLS(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server at %s not serving after %s: %w", addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// webhookServiceAccount applies manifests/webhook's RBAC with the admin
// configuration cfg and returns a configuration carrying a token of the
// webhook's ServiceAccount.
func webhookServiceAccount(cfg *rest.Config) (*rest.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.ApplyRBAC(ctx, cfg, filepath.Join(suite.root, "manifests", "webhook")); err != nil {
		return nil, err
	}
	return cluster.ServiceAccountConfig(ctx, cfg, testNamespace, "karpx-webhook", time.Hour)
}

// writeKubeconfig writes a kubeconfig for envtest's admin user.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

func requireSuite(t *testing.T) {
	t.Helper()
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
}

// kubectl runs kubectl against envtest with stdin and returns stdout,
// stderr and the error.
func kubectl(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.kubectl, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func getNodePool(t *testing.T, name string) (*karpv1.NodePool, error) {
	t.Helper()
	np := &karpv1.NodePool{}
	err := suite.client.Get(context.Background(), client.ObjectKey{Name: name}, np)
	return np, err
}

// eventually polls f every 100 ms for up to 10 s (eventuallyFor).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	eventuallyFor(t, 10*time.Second, what, f)
}

func taintKeys(ts []corev1.Taint) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Key + ":" + string(t.Effect)
	}
	return out
}

// withCilium creates a DaemonSet labelled like Cilium's agent for the
// duration of the test, and waits until the webhook injects its taint.
func withCilium(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cilium", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "cilium"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "cilium"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "cilium"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "cilium"}}},
			},
		},
	}
	if err := suite.client.Create(ctx, ds); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.client.Delete(ctx, ds) })
	// The webhook's cache sees the DaemonSet shortly after; probe with a
	// server-side dry run until the taint appears.
	eventually(t, "cilium DaemonSet detected", func() error {
		out, _, err := kubectl(t, nodePoolYAML("probe", ""), "apply", "--dry-run=server", "-f", "-", "-o", "jsonpath={.spec.template.spec.startupTaints[*].key}")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "node.cilium.io/agent-not-ready") {
			return fmt.Errorf("not yet injected: %q", out)
		}
		return nil
	})
}

func nodePoolYAML(name, extra string) string {
	return fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
%s
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
`, name, extra)
}

func TestApplyNodePoolGetsStartupTaints(t *testing.T) {
	requireSuite(t)
	withCilium(t)

	manifest := strings.Replace(nodePoolYAML("tainted", ""), "      requirements:", "      startupTaints:\n      - {key: example.com/mine, effect: NoSchedule}\n      requirements:", 1)
	t.Cleanup(func() {
		_ = suite.client.Delete(context.Background(), &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "tainted"}})
	})
	_, stderr, err := kubectl(t, manifest, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "Warning: karpx added startupTaints node.cilium.io/agent-not-ready:NoExecute") {
		t.Errorf("no admission warning naming the taints in kubectl's stderr:\n%s", stderr)
	}
	np, err := getNodePool(t, "tainted")
	if err != nil {
		t.Fatal(err)
	}
	want := "example.com/mine:NoSchedule,node.cilium.io/agent-not-ready:NoExecute,node.cilium.io/agent-not-ready:NoSchedule"
	if got := strings.Join(taintKeys(np.Spec.Template.Spec.StartupTaints), ","); got != want {
		t.Fatalf("startupTaints = %s, want %s (user taints first, in order)", got, want)
	}
	rv := np.ResourceVersion

	// Applying the same manifest again changes nothing: no duplicate, no
	// new resourceVersion, no warning.
	out, stderr, err := kubectl(t, manifest, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("second apply: %v\n%s", err, stderr)
	}
	if strings.Contains(stderr, "karpx added") {
		t.Errorf("second apply warned again:\n%s", stderr)
	}
	np, err = getNodePool(t, "tainted")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(taintKeys(np.Spec.Template.Spec.StartupTaints), ","); got != want || np.ResourceVersion != rv {
		t.Fatalf("second apply changed the NodePool (rv %s→%s): %s\n%s", rv, np.ResourceVersion, got, out)
	}
}

func TestApplyNodePoolOptOut(t *testing.T) {
	requireSuite(t)
	withCilium(t)
	manifest := nodePoolYAML("opted-out", "  annotations:\n    karpx.io/startup-taints: disabled")
	if _, stderr, err := kubectl(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, stderr)
	}
	np, err := getNodePool(t, "opted-out")
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Template.Spec.StartupTaints) != 0 {
		t.Fatalf("opted-out NodePool got taints %v", taintKeys(np.Spec.Template.Spec.StartupTaints))
	}
}

func TestApplyNodePoolDryRunHasNoSideEffect(t *testing.T) {
	requireSuite(t)
	withCilium(t)
	out, stderr, err := kubectl(t, nodePoolYAML("dry", ""), "apply", "--dry-run=server", "-f", "-", "-o", "jsonpath={.spec.template.spec.startupTaints[*].key}")
	if err != nil {
		t.Fatalf("dry-run apply: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "node.cilium.io/agent-not-ready") || !strings.Contains(stderr, "karpx added startupTaints") {
		t.Fatalf("dry run did not show the injected taints: stdout %q stderr %q", out, stderr)
	}
	if _, err := getNodePool(t, "dry"); !apierrors.IsNotFound(err) {
		t.Fatalf("dry run created the NodePool: %v", err)
	}
}

func TestConfigMapRuleAddsCustomAgentTaint(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "karpx-webhook-startup-taints", Namespace: testNamespace},
		Data: map[string]string{webhook.TaintRulesConfigKey: `rules:
- name: my-agent
  source: https://example.com/agent
  enabled: true
  taints:
  - {key: example.com/agent-not-ready, value: "true", effect: NoSchedule}
`},
	}
	if err := suite.client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.client.Delete(ctx, cm) })
	eventually(t, "ConfigMap rule applied", func() error {
		out, stderr, err := kubectl(t, nodePoolYAML("custom-agent", ""), "apply", "--dry-run=server", "-f", "-", "-o", "jsonpath={.spec.template.spec.startupTaints[*].key}")
		if err != nil {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		if !strings.Contains(out, "example.com/agent-not-ready") {
			return fmt.Errorf("not injected yet: %q", out)
		}
		return nil
	})
}

const unsafeEC2NodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: restarts-kubelet
spec:
  role: KarpenterNodeRole-test
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  amiSelectorTerms: [{alias: al2023@latest}]
  userData: |
    #!/bin/bash
    echo "tuning kubelet"
    sed -i 's/a/b/' /etc/kubernetes/kubelet/config.json
    systemctl restart kubelet
`

func TestApplyEC2NodeClassWithKubeletRestartDenied(t *testing.T) {
	requireSuite(t)
	for _, dry := range []bool{false, true} {
		args := []string{"apply", "-f", "-"}
		if dry {
			args = append(args, "--dry-run=server")
		}
		_, stderr, err := kubectl(t, unsafeEC2NodeClass, args...)
		if err == nil {
			t.Fatalf("dry-run=%v: apply succeeded, want denial", dry)
		}
		t.Logf("dry-run=%v: %s", dry, stderr)
		for _, want := range []string{`admission webhook "ec2nodeclasses.karpx.io" denied the request`, "KX003 spec.userData line 4", "systemctl restart kubelet", "fix:"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("dry-run=%v: stderr lacks %q:\n%s", dry, want, stderr)
			}
		}
		nc := &apisv1.EC2NodeClass{}
		if err := suite.client.Get(context.Background(), client.ObjectKey{Name: "restarts-kubelet"}, nc); !apierrors.IsNotFound(err) {
			t.Fatalf("dry-run=%v: denied EC2NodeClass exists: %v", dry, err)
		}
	}
}

// schemaRejected lists shared examples that Karpenter's NodePool CRD itself
// rejects, with the reason: windows-custom-userdata.yaml sets
// nodeClassRef.group to "karpenter.k8s.aws/v1", which fails the CRD's
// pattern ^[^/]*$ (karpx's linter reports it as KX105).
var schemaRejected = map[string]string{
	"windows-custom-userdata.yaml": `spec.template.spec.nodeClassRef.group: Invalid value: "karpenter.k8s.aws/v1"`,
}

// unsupportedDenied lists the shared examples that set a field karpx does
// not implement yet, which the webhook must deny naming the rule and the
// field: instance-store-ephemeral-storage.yaml asks for RAID0 instance
// store (lint.RuleUnsupportedEC2NodeClassField).
var unsupportedDenied = map[string]string{
	"instance-store-ephemeral-storage.yaml": "KX201 spec.instanceStorePolicy: not supported by karpx yet",
}

// Every shared Karpenter example must be admitted by the webhooks, but
// for the fields karpx does not implement yet (unsupportedDenied). Objects
// that the API server's CRD schema rejects are reported, and must not be
// rejected by karpx.
func TestSharedExamplesAdmitted(t *testing.T) {
	requireSuite(t)
	dir := filepath.Join(suite.root, "test", "testdata", "karpenter-examples")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skipf("no shared examples in %s", dir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, stderr, err := kubectl(t, "", "apply", "--dry-run=server", "-f", f)
			if want, ok := unsupportedDenied[filepath.Base(f)]; ok {
				if err == nil || !strings.Contains(stderr, "admission webhook") || !strings.Contains(stderr, want) {
					t.Fatalf("want a webhook denial %q, got err %v:\n%s%s", want, err, out, stderr)
				}
				return
			}
			if strings.Contains(stderr, "admission webhook") || strings.Contains(stderr, "denied by karpx") {
				t.Fatalf("rejected by the karpx webhook:\n%s", stderr)
			}
			if err != nil {
				// Only Karpenter's own CRD schema may reject an example, and
				// only where the example itself is invalid.
				want, known := schemaRejected[filepath.Base(f)]
				if !known || !strings.Contains(stderr, want) {
					t.Fatalf("apply failed: %v\n%s", err, stderr)
				}
				t.Logf("rejected by the NodePool CRD schema, not by karpx:\n%s", stderr)
				return
			}
			t.Logf("%s%s", out, stderr)
		})
	}
}

// The webhook's view of a NodePool that references a missing EC2NodeClass
// is a warning, not a denial.
func TestNodePoolMissingNodeClassWarns(t *testing.T) {
	requireSuite(t)
	manifest := strings.Replace(nodePoolYAML("orphan", ""), "name: default}", "name: does-not-exist}", 1)
	_, stderr, err := kubectl(t, manifest, "apply", "--dry-run=server", "-f", "-")
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "Warning: KX101") {
		t.Fatalf("no KX101 warning:\n%s", stderr)
	}
}

// A static NodePool (spec.replicas) is admitted: karpx implements static
// capacity (autoscaler/controllers/nodepool/static). Its control, the
// same NodePool with weight, is refused by Karpenter's CEL rule in the
// CRD ('weight' is not supported on static NodePools).
func TestStaticNodePoolAdmitted(t *testing.T) {
	requireSuite(t)
	manifest := strings.Replace(nodePoolYAML("static", ""), "spec:\n  template:", "spec:\n  replicas: 2\n  template:", 1)
	if _, stderr, err := kubectl(t, manifest, "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("static NodePool: %v\n%s", err, stderr)
	}
	weighted := strings.Replace(manifest, "  replicas: 2\n", "  replicas: 2\n  weight: 10\n", 1)
	_, stderr, err := kubectl(t, weighted, "apply", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(stderr, "'weight' is not supported on static NodePools") {
		t.Fatalf("control with weight: want the CRD's CEL denial, got err %v:\n%s", err, stderr)
	}
}

// The deployable manifests (the kustomize base) pass the API server's
// validation. The webhook configurations are renamed for the check, since
// the suite already runs configurations of the same name (rewritten by
// envtest to point at the local server).
func TestManifestsServerDryRun(t *testing.T) {
	requireSuite(t)
	built, stderr, err := kubectl(t, "", "kustomize", filepath.Join(suite.root, "manifests", "webhook"))
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, stderr)
	}
	var docs []string
	for _, doc := range strings.Split(built, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "WebhookConfiguration") {
			obj["metadata"].(map[string]any)["name"] = "karpx-webhook-manifest-check"
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(out))
	}
	if len(docs) < 10 {
		t.Fatalf("kustomize produced %d objects", len(docs))
	}
	if _, stderr, err := kubectl(t, strings.Join(docs, "---\n"), "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, stderr)
	}
}
