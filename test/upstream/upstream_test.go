package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
)

// envtest's webhook installer logs through controller-runtime's logger.
func init() { ctrllog.SetLogger(logr.Discard()) }

// upstreamEnv is a control plane run by upstream Karpenter's kwok provider.
type upstreamEnv struct {
	t       *testing.T
	ctx     context.Context
	root    string
	cluster *cluster.Cluster
	kube    client.Client
	delay   time.Duration
}

// nodePool is a NodePool as a karpx user writes it (nodeClassRef to an
// EC2NodeClass); ApplyNodePool translates the reference only. It selects
// on a catalogue label (instance-category), which the instance-types file
// must carry for Karpenter to honour it.
func nodePool(name, class string, labels map[string]string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		{Key: catalog.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
	}
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("64")}
	return np
}

func deployment(name string, replicas int32, cpu string, nodeSelector map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector:                  nodeSelector,
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")}}}},
			}}},
	}
}

func (e *upstreamEnv) eventually(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		e.t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// waitWebRunning waits up to 3 minutes until the 3 pods of Deployment web
// are Running and every NodeClaim of NodePool general is Initialized.
func (e *upstreamEnv) waitWebRunning() {
	e.eventually(3*time.Minute, "web pods Running on Karpenter's Initialized NodeClaims", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil || len(pods.Items) != 3 {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		claims, err := e.claimsOf(ctx, "general")
		if err != nil || len(claims) == 0 {
			return false, nil
		}
		for i := range claims {
			if !conditionTrue(&claims[i], karpv1.ConditionTypeInitialized) {
				return false, nil
			}
		}
		return true, nil
	})
}

// claimsOf lists the NodeClaims of a NodePool.
func (e *upstreamEnv) claimsOf(ctx context.Context, pool string) ([]karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	if err := e.kube.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func conditionTrue(nc *karpv1.NodeClaim, t string) bool {
	c := nc.StatusConditions().Get(t)
	return c != nil && c.IsTrue()
}

// karpx runs the real `kubectl karpx ARGS` (kubectl on PATH finds the
// plugin: pluginOnPath) and fails the test when it errors.
func (e *upstreamEnv) karpx(args ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	out, err := e.cluster.Kubectl(ctx, nil, append([]string{"karpx"}, args...)...)
	if err != nil {
		e.t.Fatalf("kubectl karpx %s errored: %v", strings.Join(args, " "), err)
	}
	e.t.Logf("kubectl karpx %s:\n%s", strings.Join(args, " "), out)
	return out
}

// pluginOnPath puts the repository's bin/ (kubectl-karpx from `make
// build`, which `make test` runs first) first on PATH for the rest of the
// test, so the real kubectl finds the plugin; without bin/kubectl-karpx it
// builds one into a temporary directory instead.
func pluginOnPath(t *testing.T, root string) {
	t.Helper()
	dir := filepath.Join(root, "bin")
	if _, err := os.Stat(filepath.Join(dir, "kubectl-karpx")); err != nil {
		dir = t.TempDir()
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-karpx"), "./cmd/kubectl-karpx")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building kubectl-karpx: %v\n%s", err, out)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestUpstreamKarpenterKwok runs upstream Karpenter's kwok provider
// (bin/karpenter-kwok, go.mod's version), the head-to-head's third side,
// on one control plane with karpx's instance types and ec2sim's boot delay:
// Karpenter launches NodeClaims for pending pods on Nodes of the catalogue's
// types, and after a crash a restarted process (as the head-to-head
// harness restarts it) launches again. The real `kubectl karpx` and the
// webhook run against the real AWS provider (TestUpstreamKarpenterAWS).
func TestUpstreamKarpenterKwok(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real control plane; skipped with -short")
	}
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, BinaryName)); err != nil {
		t.Skipf("%s not found in %s: run `make karpenter-kwok` (or `make test`, which builds it)", BinaryName, bin)
	}
	start := time.Now()
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	kube, err := client.New(c.RESTConfig, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// ec2sim's launch-to-Node time with its default PendingDelay and a
	// BootDelay of 800ms: 1s, which the KWOKNodeClass can express.
	delay, err := RegistrationDelay(ec2sim.Config{BootDelay: 800 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := &upstreamEnv{t: t, ctx: ctx, root: filepath.Dir(bin), cluster: c, kube: kube, delay: delay}

	general := nodePool("general", "default", nil)
	types := filepath.Join(t.TempDir(), "instance-types.json")
	if err := WriteInstanceTypes(types, ec2sim.Config{}, RequirementLabels(general)...); err != nil {
		t.Fatal(err)
	}
	k := StartForTest(t, c, Options{InstanceTypesFile: types})
	t.Logf("control plane and Karpenter ready in %s (Karpenter log: %s)", time.Since(start).Round(time.Millisecond), k.LogPath)

	t.Run("Launch", func(t *testing.T) { e.t = t; e.launch(general) })
	if t.Failed() {
		return
	}
	t.Run("Restart", func(t *testing.T) { e.t = t; e.restart(k, types) })
	t.Logf("TestUpstreamKarpenterKwok took %s", time.Since(start).Round(time.Millisecond))
}

// launch creates NodePool general (translated) with a three-pod
// Deployment and waits until Karpenter's NodeClaims are Initialized and
// the pods Running on them.
func (e *upstreamEnv) launch(general *karpv1.NodePool) {
	t := e.t
	t0 := time.Now()
	if _, err := ApplyNodePool(e.ctx, e.kube, general, e.delay); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Create(e.ctx, deployment("web", 3, "1", nil)); err != nil {
		t.Fatal(err)
	}
	e.waitWebRunning()
	claims, err := e.claimsOf(e.ctx, "general")
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims {
		var node corev1.Node
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
			t.Fatalf("NodeClaim %s: Node %q: %v", nc.Name, nc.Status.NodeName, err)
		}
		// The instance-types file carried the catalogue label the NodePool
		// selects on; the Node has it, and its allocatable is the
		// catalogue's, as an ec2sim Node's.
		it, ok := catalog.Get(node.Labels[corev1.LabelInstanceTypeStable])
		if !ok || !slices.Contains([]string{"c", "m", "r"}, node.Labels[catalog.LabelInstanceCategory]) {
			t.Errorf("Node %s: instance type %q, category %q", node.Name, node.Labels[corev1.LabelInstanceTypeStable], node.Labels[catalog.LabelInstanceCategory])
			continue
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			if got, want := node.Status.Allocatable[r], it.Allocatable[r]; got.Cmp(want) != 0 {
				t.Errorf("Node %s (%s): allocatable %s %s, catalogue %s", node.Name, it.Name, r, got.String(), want.String())
			}
		}
	}
	t.Logf("%d NodeClaims Initialized and 3 pods Running in %s", len(claims), time.Since(t0).Round(time.Millisecond))
}

// restart kills Karpenter (a crash), starts it again as the head-to-head
// harness does in the middle of a scenario, and checks that the new
// process keeps the old log and launches for a new pending pod.
func (e *upstreamEnv) restart(old *Karpenter, types string) {
	t := e.t
	old.Kill()
	k, err := Start(e.ctx, e.cluster, Options{InstanceTypesFile: types, Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("stopping %s: %v", BinaryName, err)
		}
		if t.Failed() {
			t.Logf("--- restarted %s log ---\n%s", BinaryName, k.LogTail(8<<10))
		}
	})
	if k.LogPath == old.LogPath {
		t.Errorf("the restart reuses log %s", k.LogPath)
	}
	before, err := e.claimsOf(e.ctx, "general")
	if err != nil {
		t.Fatal(err)
	}
	// A pod as big as a whole node of the NodePool's largest fitting
	// type cannot join the existing ones: it needs a new NodeClaim.
	if err := e.kube.Create(e.ctx, deployment("after-restart", 1, "7", nil)); err != nil {
		t.Fatal(err)
	}
	e.eventually(2*time.Minute, "a NodeClaim launched by the restarted Karpenter", func(ctx context.Context) (bool, error) {
		claims, err := e.claimsOf(ctx, "general")
		return err == nil && len(claims) > len(before), nil
	})
}

// rowHas reports whether one line of out contains every field.
func rowHas(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if !slices.ContainsFunc(fields, func(f string) bool { return !strings.Contains(line, f) }) {
			return true
		}
	}
	return false
}

// unsafeNodeClass restarts the kubelet in its userData, which the
// validating webhook denies (KX003).
const unsafeNodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: unsafe}
spec:
  role: KarpenterNodeRole-karpx
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: karpx}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: karpx}}]
  userData: |
    #!/bin/bash
    systemctl restart kubelet
`

// safeNodeClass is the control: the same class without the restart.
const safeNodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: safe}
spec:
  role: KarpenterNodeRole-karpx
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: karpx}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: karpx}}]
`

// ciliumRule turns the built-in Cilium startup-taint rule on through the
// webhook's ConfigMap (as if Cilium's DaemonSet had been found).
const ciliumRule = `apiVersion: v1
kind: ConfigMap
metadata: {name: karpx-webhook-startup-taints, namespace: karpx-system}
data:
  rules.yaml: |
    rules:
    - {name: cilium, enabled: true}
`

const ciliumTaintKey = "node.cilium.io/agent-not-ready"

func hasTaint(taints []corev1.Taint, key string) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == key })
}

// startWebhook registers manifests/webhook/webhooks.yaml with the API
// server (service references rewritten to a loopback URL with a test CA,
// as envtest does) and runs bin/karpx-webhook as ServiceAccount
// karpx-system/karpx-webhook with manifests/webhook's RBAC; a Forbidden
// answer in its log fails t.
func startWebhook(t *testing.T, ctx context.Context, c *cluster.Cluster, root string) {
	t.Helper()
	bin := filepath.Join(root, "bin", "karpx-webhook")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make build` (%v)", bin, err)
	}
	install := &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "manifests", "webhook", "webhooks.yaml")}, LocalServingHost: "127.0.0.1"}
	if err := install.Install(c.RESTConfig); err != nil {
		t.Fatalf("installing the webhook configurations: %v", err)
	}
	t.Cleanup(func() { _ = install.Cleanup() })
	sa := cluster.ServiceAccountForTest(t, c.RESTConfig, filepath.Join(root, "manifests", "webhook"), "karpx-system", "karpx-webhook")
	kubeconfig := filepath.Join(t.TempDir(), "karpx-webhook.kubeconfig")
	if err := cluster.WriteKubeconfig(sa, kubeconfig); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--namespace=karpx-system", "--cert-mode=cert-manager",
		"--cert-dir="+install.LocalServingCertDir, "--port="+strconv.Itoa(install.LocalServingPort),
		"--metrics-bind-address=0", "--health-probe-bind-address="+probe)
	logPath := filepath.Join(t.TempDir(), "karpx-webhook.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var forbidden []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if strings.Contains(sc.Text(), " is forbidden: ") {
				mu.Lock()
				forbidden = append(forbidden, sc.Text())
				mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		<-done
		logFile.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, line := range forbidden {
			t.Errorf("RBAC: karpx-webhook: %s (add the permission to manifests/webhook)", line)
		}
		if t.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				t.Logf("karpx-webhook log:\n%s", data)
			}
		}
	})
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(rctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("karpx-webhook exited")
		default:
		}
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("karpx-webhook not ready: %v", err)
	}
}
