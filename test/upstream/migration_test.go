package upstream

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/test/cluster"
)

// Migration scenario constants. One pod of migrationPodCPU fills an
// m5.large (2 vCPU): no pod fits beside another, and the NodePool allows
// no other type, so neither Karpenter nor karpx has a legitimate delete
// or replace (consolidation) on these nodes, and nothing drifted.
const (
	migrationType           = "m5.large"
	migrationPodCPU         = "1500m"
	migrationReplicas       = 3
	migrationConsolidate    = 30 * time.Second
	migrationWatchSlack     = 2 * time.Minute
	migrationKarpenterWatch = 30 * time.Second
	migrationGCPeriod       = 10 * time.Second
	migrationGCGrace        = 30 * time.Second
)

// migrationSnapshot is what Karpenter left: its NodeClaims by name (UID),
// their Nodes and the ids of their instances.
type migrationSnapshot struct {
	claims    map[string]types.UID
	nodes     []string
	instances []string
}

// TestMigrationFromKarpenterAWS is the migration path of docs/operations.md
// ("Migrating from Karpenter") on the real thing: the real Karpenter AWS
// provider (bin/karpenter-aws) launches nodes for a workload through
// ec2sim and is stopped; karpx (karpx-controller, under manifests/
// controller's RBAC) starts on the same cluster and the same ec2sim. The
// NodePool (consolidateAfter 30s, WhenEmptyOrUnderutilized) allows only
// m5.large and each pod fills one, so Karpenter leaves every node (it
// marks them Consolidatable and runs for a further 30 s without touching
// them), and karpx must too: for consolidateAfter + 2 minutes after karpx
// is ready, no NodeClaim Karpenter launched is Drifted, deleted or
// replaced, no Node is tainted karpenter.sh/disrupted, and every instance
// still runs (garbage collection, compressed to a 10 s period and 30 s
// grace, does not take Karpenter's instances for leaks). karpx is
// then shown to act on the same NodePool (one more pod gets a NodeClaim
// of its own). The control rewrites one Karpenter NodeClaim's
// karpenter.k8s.aws/ec2nodeclass-hash to a value karpx's EC2NodeClass
// hash gave before it became Karpenter's (any other value at hash version
// v5 reads the same): karpx must then mark it Drifted (NodeClassDrift),
// so the watch above would have seen a drift had karpx computed its own.
func TestMigrationFromKarpenterAWS(t *testing.T) {
	e := newProblemEnv(t, nil, 5*time.Minute)
	e.apply(EC2NodeClassYAML("default", e.cluster.Name, "al2023@latest"))
	np := problemPool("general", "default", []string{migrationType}, nil)
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(migrationConsolidate.String())
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	e.createPools(np)
	if err := e.kube.Create(e.ctx, deployment("web", migrationReplicas, migrationPodCPU, nil)); err != nil {
		t.Fatal(err)
	}
	e.eventually(4*time.Minute, fmt.Sprintf("%d web pods Running on Karpenter's Initialized NodeClaims", migrationReplicas), func(ctx context.Context) (bool, error) {
		return e.running(ctx, "web") == migrationReplicas && e.allInitialized(ctx, "general", migrationReplicas), nil
	})
	before := e.migrationSnapshot()
	t.Logf("Karpenter launched %d NodeClaims: %v", len(before.claims), before.nodes)
	// Karpenter itself leaves them: once it has marked every NodeClaim
	// Consolidatable (consolidateAfter passed), it runs on for
	// migrationKarpenterWatch and disrupts none.
	e.eventually(migrationConsolidate+2*time.Minute, "Karpenter marks its NodeClaims Consolidatable", func(ctx context.Context) (bool, error) {
		claims, err := e.claimsOf(ctx, "general")
		if err != nil {
			return false, nil
		}
		for i := range claims {
			if !conditionTrue(&claims[i], karpv1.ConditionTypeConsolidatable) {
				return false, nil
			}
		}
		return len(claims) == migrationReplicas, nil
	})
	e.watchUntouched(before, migrationKarpenterWatch, "Karpenter")
	if t.Failed() {
		return
	}
	if err := e.k.Stop(); err != nil {
		t.Fatalf("stopping Karpenter: %v", err)
	}

	karpxLog := e.startKarpx()
	ready := time.Now()
	e.watchUntouched(before, migrationConsolidate+migrationWatchSlack, "karpx")
	if t.Failed() {
		return
	}
	t.Logf("karpx left Karpenter's %d NodeClaims, Nodes and instances alone for %s after it started", len(before.claims), time.Since(ready).Round(time.Second))

	// karpx acts on the same NodePool: one more pod gets a new NodeClaim.
	if _, err := e.cluster.Kubectl(e.ctx, nil, "scale", "deployment", "web", "-n", "default", fmt.Sprintf("--replicas=%d", migrationReplicas+1)); err != nil {
		t.Fatal(err)
	}
	e.eventually(4*time.Minute, "karpx launches a NodeClaim for the 4th pod", func(ctx context.Context) (bool, error) {
		return e.running(ctx, "web") == migrationReplicas+1 && e.allInitialized(ctx, "general", migrationReplicas+1), nil
	})

	// Control: a NodeClaim whose EC2NodeClass hash is not Karpenter's (as
	// karpx's own hash was) is drifted by karpx within the watch above.
	victim := before.nodes[0]
	var nc karpv1.NodeClaim
	for name := range before.claims {
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: name}, &nc); err != nil {
			t.Fatal(err)
		}
		if nc.Status.NodeName == victim {
			break
		}
	}
	patch := []byte(`{"metadata":{"annotations":{"karpenter.k8s.aws/ec2nodeclass-hash":"1234567890123456789"}}}`)
	if err := e.kube.Patch(e.ctx, &nc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	e.eventually(migrationConsolidate+migrationWatchSlack, "control: karpx marks NodeClaim "+nc.Name+" Drifted (NodeClassDrift)", func(ctx context.Context) (bool, error) {
		var got karpv1.NodeClaim
		if err := e.kube.Get(ctx, client.ObjectKey{Name: nc.Name}, &got); err != nil {
			return true, nil // replaced already: drifted and disrupted
		}
		c := got.StatusConditions().Get(karpv1.ConditionTypeDrifted)
		return c != nil && c.IsTrue() && c.Reason == "NodeClassDrift", nil
	})
	for _, line := range ForbiddenLines(karpxLog) {
		t.Errorf("RBAC: karpx-controller: %s", line)
	}
}

// allInitialized reports whether pool has want NodeClaims, each Initialized.
func (e *problemEnv) allInitialized(ctx context.Context, pool string, want int) bool {
	claims, err := e.claimsOf(ctx, pool)
	if err != nil || len(claims) != want {
		return false
	}
	for i := range claims {
		if !conditionTrue(&claims[i], karpv1.ConditionTypeInitialized) {
			return false
		}
	}
	return true
}

// migrationSnapshot records NodePool general's NodeClaims, Nodes and
// running instances.
func (e *problemEnv) migrationSnapshot() migrationSnapshot {
	claims, err := e.claimsOf(e.ctx, "general")
	if err != nil {
		e.t.Fatal(err)
	}
	s := migrationSnapshot{claims: map[string]types.UID{}}
	for _, nc := range claims {
		s.claims[nc.Name] = nc.UID
		s.nodes = append(s.nodes, nc.Status.NodeName)
		s.instances = append(s.instances, nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:])
	}
	sort.Strings(s.nodes)
	return s
}

// watchUntouched polls every second for d and fails the test at the first
// sign that who disrupted what before holds: a NodeClaim gone, replaced
// (another UID), deleting or Drifted; a new NodeClaim in the NodePool; a
// Node gone, deleting or tainted karpenter.sh/disrupted; an instance not
// running.
func (e *problemEnv) watchUntouched(before migrationSnapshot, d time.Duration, who string) {
	t := e.t
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if problem := e.disturbance(before); problem != "" {
			t.Errorf("%s disturbed what Karpenter left %s into the watch: %s", who, (d - time.Until(deadline)).Round(time.Second), problem)
			return
		}
		time.Sleep(time.Second)
	}
}

// disturbance returns the first difference between the cluster and ec2sim
// now and before that a disruption would make, or "".
func (e *problemEnv) disturbance(before migrationSnapshot) string {
	claims, err := e.claimsOf(e.ctx, "general")
	if err != nil {
		return "listing NodeClaims: " + err.Error()
	}
	if len(claims) != len(before.claims) {
		return fmt.Sprintf("%d NodeClaims, want the %d Karpenter launched", len(claims), len(before.claims))
	}
	for _, nc := range claims {
		if uid, ok := before.claims[nc.Name]; !ok || uid != nc.UID {
			return "NodeClaim " + nc.Name + " is not one Karpenter launched (a replacement)"
		}
		if !nc.DeletionTimestamp.IsZero() {
			return "NodeClaim " + nc.Name + " is being deleted"
		}
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeDrifted); c != nil && c.IsTrue() {
			return "NodeClaim " + nc.Name + " is Drifted (" + c.Reason + ")"
		}
	}
	for _, name := range before.nodes {
		var n corev1.Node
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return "Node " + name + ": " + err.Error()
		}
		if !n.DeletionTimestamp.IsZero() {
			return "Node " + name + " is being deleted"
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == karpv1.DisruptedTaintKey {
				return "Node " + name + " is tainted " + taint.ToString()
			}
		}
	}
	running := map[string]bool{}
	for _, in := range e.sim.Instances() {
		running[in.ID] = in.State == "running"
	}
	for _, id := range before.instances {
		if !running[id] {
			return "instance " + id + " is not running"
		}
	}
	return ""
}

// startKarpx starts karpx-controller ($KARPX_PREBUILT_BIN, else bin/) as
// ServiceAccount karpx/karpx with manifests/controller's RBAC, against the
// cluster and ec2sim Karpenter used, and waits until it answers /readyz.
// The test's end kills it (and shows the end of its log if the test
// failed); it returns the log's path.
func (e *problemEnv) startKarpx() string {
	t := e.t
	t.Helper()
	binDir := os.Getenv("KARPX_PREBUILT_BIN")
	if binDir == "" {
		binDir = filepath.Join(e.root, "bin")
	}
	sa := cluster.ServiceAccountForTest(t, e.cluster.RESTConfig, filepath.Join(e.root, "manifests", "controller"), "karpx", "karpx")
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "karpx-controller.kubeconfig")
	if err := cluster.WriteKubeconfig(sa, kubeconfig); err != nil {
		t.Fatal(err)
	}
	probe, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "karpx-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "karpx-controller"),
		"--kubeconfig="+kubeconfig,
		"--cluster-name="+e.cluster.Name,
		"--cluster-endpoint="+e.cluster.RESTConfig.Host,
		"--region="+AWSRegion,
		"--ec2-endpoint="+e.endpoint,
		"--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probe),
		"--leader-elect=false",
		// Garbage collection compressed (defaults 2m and 5m), so that
		// within the watch it lists the instances many times and would
		// terminate any of Karpenter's it did not recognise as claimed.
		"--gc-period="+migrationGCPeriod.String(),
		"--gc-grace="+migrationGCGrace.String(),
	)
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID=AKIAEXAMPLEKARPXSIM00",
		"AWS_SECRET_ACCESS_KEY=karpx-simulator-secret",
		"AWS_EC2_METADATA_DISABLED=true",
		// The status endpoints (default :8082) off, as metrics: two
		// controllers on one machine (the differential tests, parallel
		// test binaries) would fight over the port.
		"STATUS_BIND_ADDRESS=0",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				t.Logf("--- karpx-controller log (last 8 KiB) ---\n%s", out[max(0, len(out)-8<<10):])
			}
		}
	})
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)
	e.eventually(2*time.Minute, "karpx-controller ready", func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("karpx-controller exited (log %s)", logPath)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return logPath
}
