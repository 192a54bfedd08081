package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/karpx/karpx/test/cluster"
)

// The package's tests share a small pool of control planes (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok): a start
// costs 20-60 s on this kind of machine, paid once per pool member instead
// of once per test. The sequential tests all use the first member; the
// parallel ones (runInParallel) each hold one member at a time, and the pool
// grows to at most sharedPoolSize members as they ask. Each test still gets
// its own simulator and autoscaler (newEnvWith), and when it ends, after its
// autoscaler and simulator have stopped, its member is reset to what it held
// when it was started with the CRDs and the controller's RBAC
// (cluster.Baseline.Reset: every NodePool, NodeClaim, Node, EC2NodeClass,
// workload, namespace, lease, event and webhook configuration the test
// created is deleted, finalizers removed), so the next test's autoscaler
// sees nothing of the last. A member that cannot be reset, or that fails the
// kwok probe after a failed test, is stopped and the next test starts a
// fresh one in its place.
//
// Tests that restart, stop or break the control plane get their own:
// envOptions.ownControlPlane or envOptions.audit, or their name in
// ownControlPlaneTests.
var shared struct {
	sync.Mutex
	pool []*sharedMember
}

// sharedMember is one control plane of the pool.
type sharedMember struct {
	cluster *cluster.Cluster
	base    *cluster.Baseline
	// inUse is set while a test holds the member.
	inUse bool
}

// sharedPoolSize is the most control planes the pool holds: the e2e
// package's -parallel (KARPX_E2E_PARALLEL, default 3, see the Makefile's
// E2E_PARALLEL), so every parallel test can hold one. A test that asks while
// every member is held (a subtest of a holder) starts one of its own.
func sharedPoolSize() int {
	if n, err := strconv.Atoi(os.Getenv("KARPX_E2E_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 3
}

// ownControlPlaneTests are the top-level tests whose environments need a
// control plane of their own although their helpers do not say so, with
// the reason.
var ownControlPlaneTests = map[string]string{
	"TestChaosControlPlaneRestart": "stops and restarts the whole control plane (kwokctl stop/start)",
	"TestChaosCombined":            "kills and restarts kube-apiserver",
}

// runInParallel marks t parallel: the package's long scenarios that spend
// most of their time waiting (for consolidateAfter, for EC2's token
// buckets to refill over minutes, for a spot notice to run out, for a
// window in which nothing may launch) and the chaos suite's fault
// scenarios (waiting for pods through a fault, then for garbage
// collection) run beside each other, once every
// sequential test has finished, at most -parallel at a time (the Makefile
// sets E2E_PARALLEL), each on a member of the shared pool
// (sharedControlPlane). KARPX_E2E_SERIAL=1 runs them one after the other
// (to rule parallelism out when one fails, or to measure what it saves).
// A test that calls it must not change process-wide state (t.Setenv, the
// working directory) nor assert on another test's in-process metrics, nor
// bound a duration that CPU contention stretches (TestChaosLeaderChange's
// Lease takeover stays sequential).
func runInParallel(t *testing.T) {
	if os.Getenv("KARPX_E2E_SERIAL") == "" {
		t.Parallel()
	}
}

// needsOwnControlPlane reports whether t (or its top-level test) is in
// ownControlPlaneTests, or KARPX_E2E_OWN_CONTROL_PLANE is set (every test
// gets its own, as before sharing: to rule sharing out when a test fails,
// or to measure what it saves).
func needsOwnControlPlane(t *testing.T) bool {
	if os.Getenv("KARPX_E2E_OWN_CONTROL_PLANE") != "" {
		return true
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	_, ok := ownControlPlaneTests[top]
	return ok
}

// sharedControlPlane returns a member of the package's shared pool for t:
// the first free one, or a new one while the pool is below sharedPoolSize
// (started with the CRDs from root/manifests/crds and the RBAC of
// root/manifests/controller applied before its baseline is taken). The
// member is reset when t ends. If every member is held and the pool is
// full, t gets a control plane of its own with the CRDs installed.
func sharedControlPlane(t *testing.T, root string) *cluster.Cluster {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	var m *sharedMember
	for _, candidate := range shared.pool {
		if !candidate.inUse {
			m = candidate
			break
		}
	}
	if m == nil && len(shared.pool) >= sharedPoolSize() {
		t.Logf("every shared control plane is in use (%d): starting one for %s", len(shared.pool), t.Name())
		c := cluster.StartForTest(t)
		if err := c.InstallCRDs(context.Background(), filepath.Join(root, "manifests", "crds")); err != nil {
			t.Fatalf("installing CRDs: %v", err)
		}
		return c
	}
	if m == nil {
		m = &sharedMember{}
		shared.pool = append(shared.pool, m)
	}
	m.inUse = true
	if m.cluster == nil {
		name := "karpx-e2e-shared"
		if i := slices.Index(shared.pool, m); i > 0 {
			name = fmt.Sprintf("%s-%d", name, i+1)
		}
		// Started outside the lock; m is held meanwhile.
		shared.Unlock()
		c, base, err := startShared(name, root, t.Logf)
		shared.Lock()
		if err != nil {
			m.inUse = false
			t.Fatal(err)
		}
		m.cluster, m.base = c, base
	}
	c := m.cluster
	// Registered before the simulator's and the autoscaler's cleanups, so
	// it runs after them.
	t.Cleanup(func() { releaseShared(t, m) })
	return c
}

// startShared starts a pool member named name: the control plane, the CRDs
// of root/manifests/crds, the RBAC of root/manifests/controller, and the
// baseline its resets return to. It returns the start's or an install's
// error (after stopping what it started).
func startShared(name, root string, logf func(string, ...any)) (*cluster.Cluster, *cluster.Baseline, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cluster.StartProbed(ctx, cluster.Options{Name: name, AuditRemovals: true}, logf)
	if err != nil {
		return nil, nil, err
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "manifests", "crds")); err != nil {
		_ = c.Stop()
		return nil, nil, fmt.Errorf("installing CRDs: %w", err)
	}
	if err := cluster.ApplyRBAC(ctx, c.RESTConfig, filepath.Join(root, "manifests", "controller")); err != nil {
		_ = c.Stop()
		return nil, nil, fmt.Errorf("applying the controller's RBAC: %w", err)
	}
	base, err := c.Snapshot(ctx)
	if err != nil {
		_ = c.Stop()
		return nil, nil, err
	}
	logf("shared control plane %s started in %s", c.Name, time.Since(start).Round(100*time.Millisecond))
	return c, base, nil
}

// releaseShared resets member m after t, or stops it when it cannot be
// reset or (after a failed test) no longer passes the probe; the next test
// that takes m then starts a fresh control plane in its place.
func releaseShared(t *testing.T, m *sharedMember) {
	shared.Lock()
	defer shared.Unlock()
	defer func() { m.inUse = false }()
	c := m.cluster
	if c == nil {
		return
	}
	if t.Failed() {
		c.FailureLogs(t)
	}
	start := time.Now()
	err := m.base.Reset(context.Background(), t.Logf)
	if err == nil && t.Failed() {
		err = c.Probe(context.Background())
	}
	if err != nil {
		t.Logf("stopping shared control plane %s (the next test starts a fresh one): %v", c.Name, err)
		_ = c.Stop()
		m.cluster, m.base = nil, nil
		return
	}
	t.Logf("shared control plane %s reset in %s", c.Name, time.Since(start).Round(100*time.Millisecond))
}

// stopShared stops every member of the pool; it runs after every test.
func stopShared() {
	shared.Lock()
	defer shared.Unlock()
	for _, m := range shared.pool {
		if m.cluster != nil {
			_ = m.cluster.Stop()
			m.cluster, m.base = nil, nil
		}
	}
}

// TestMain sets the simulator's credentials for every autoscaler of the
// process (the AWS SDK reads them from the environment; set once here,
// not per test, because t.Setenv is not allowed in parallel tests, see
// runInParallel), runs the tests and stops the shared control plane.
func TestMain(m *testing.M) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKARPXSIM00", "AWS_SECRET_ACCESS_KEY": simSecretKey} {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	stopShared()
	if plugin.dir != "" {
		_ = os.RemoveAll(plugin.dir)
	}
	os.Exit(code)
}

// sharedLeftovers are objects of every kind that must not outlive a test
// on the shared control plane: a namespace with a Deployment and a
// DaemonSet (its pods terminate gracefully, 30 s), cluster-
// scoped NodePool, EC2NodeClass, NodeClaim and Node (the last two with
// karpx's termination finalizer, as an autoscaler stopped mid-termination
// leaves them), a Lease like the leader election's and a webhook
// configuration.
var sharedLeftovers = manifests(`apiVersion: v1
kind: Namespace
metadata: {name: leftover}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: leftover, namespace: leftover}
spec:
  replicas: 2
  selector: {matchLabels: {app: leftover}}
  template:
    metadata: {labels: {app: leftover}}
    spec:
      containers: [{name: pause, image: registry.k8s.io/pause:3.10}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: leftover-agent, namespace: leftover}
spec:
  selector: {matchLabels: {app: leftover-agent}}
  template:
    metadata: {labels: {app: leftover-agent}}
    spec:
      terminationGracePeriodSeconds: 30
      containers: [{name: pause, image: registry.k8s.io/pause:3.10}]
`, nodePool{Name: "leftover", Requirements: []string{inRequirement("kubernetes.io/arch", "amd64")}}.yaml(),
	nodeClass{Name: "leftover"}.yaml("leftover"), `apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: leftover, finalizers: [karpenter.sh/termination], labels: {karpenter.sh/nodepool: leftover}}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: leftover}
  requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
---
apiVersion: v1
kind: Node
metadata:
  name: leftover
  finalizers: [karpenter.sh/termination]
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {karpenter.sh/nodepool: leftover}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leftover, namespace: karpx}
spec: {holderIdentity: leftover}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: leftover}
webhooks:
- name: leftover.karpx.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: "https://127.0.0.1:1/validate"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
`)

// TestSharedControlPlaneIsReset: a first test on the shared control plane
// leaves objects of every kind behind (sharedLeftovers, the Deployment's
// pods Running on the leftover Node); the next test gets the same control
// plane and finds none of them, while what the cluster held before (the
// CRDs, the controller's ServiceAccount) is still there.
func TestSharedControlPlaneIsReset(t *testing.T) {
	var first *cluster.Cluster
	t.Run("first", func(t *testing.T) {
		e := newBareEnv(t, "karpx-shared-first")
		first = e.cluster
		if out, err := e.cluster.Kubectl(e.ctx, []byte(sharedLeftovers), "apply", "-f", "-"); err != nil {
			t.Fatalf("applying the leftovers: %v\n%s", err, out)
		}
		e.eventually(60*time.Second, "3 leftover pods Running (2 of the Deployment, 1 of the DaemonSet)", func(ctx context.Context) (bool, error) {
			out, err := e.cluster.Kubectl(ctx, nil, "get", "pods", "-n", "leftover", "--field-selector=status.phase=Running", "-o", "name")
			return err == nil && strings.Count(out, "pod/") == 3, nil
		})
	})
	if t.Failed() {
		t.FailNow()
	}
	if first == nil {
		t.Skip("the first test was skipped (no control plane)")
	}
	t.Run("second", func(t *testing.T) {
		e := newBareEnv(t, "karpx-shared-second")
		if e.cluster != first {
			t.Fatalf("second test got control plane %s, want the shared %s", e.cluster.Name, first.Name)
		}
		for _, kind := range []string{"namespace", "nodepool", "ec2nodeclass", "nodeclaim", "node", "validatingwebhookconfiguration"} {
			if out, err := e.cluster.Kubectl(e.ctx, nil, "get", kind, "leftover", "--ignore-not-found", "-o", "name"); err != nil || out != "" {
				t.Errorf("%s leftover after the first test: %q %v", kind, out, err)
			}
		}
		for _, ns := range []string{"leftover", "karpx"} {
			if out, err := e.cluster.Kubectl(e.ctx, nil, "get", "pods,deployments,daemonsets,leases", "-n", ns, "-o", "name"); err != nil || out != "" {
				t.Errorf("objects left in namespace %s: %q %v", ns, out, err)
			}
		}
		if out, err := e.cluster.Kubectl(e.ctx, nil, "get", "serviceaccount", "karpx", "-n", "karpx", "-o", "name"); err != nil || !strings.Contains(out, "karpx") {
			t.Errorf("the baseline's ServiceAccount karpx/karpx is gone: %q %v", out, err)
		}
		if out, err := e.cluster.Kubectl(e.ctx, nil, "get", "crd", "nodepools.karpenter.sh", "-o", "name"); err != nil || out == "" {
			t.Errorf("the baseline's NodePool CRD is gone: %q %v", out, err)
		}
	})
}
