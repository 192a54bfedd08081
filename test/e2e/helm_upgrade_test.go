package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/test/cluster"
)

// TestHelmUpgradeRollback: the previous version's charts (karpx-crd and
// karpx) and binaries are installed with Helm's SDK (loadPreviousRelease
// says which version), pods are provisioned, then, while a NodePool drift
// is replacing every node and a pod is pending, the working tree's charts
// are installed with `helm upgrade` (karpx-crd first), the webhook
// Deployment's two replicas roll to the current binary one at a time
// (chartWebhook.roll) under a load of admission requests through the API
// server (admissionLoad), and the controller hands its leader Lease over
// to a process of the current binary. Then `helm rollback` returns both
// releases to revision 1 with the same drift, roll and handover back to
// the previous binaries. After each step: no NodeClaim, Node or instance
// lost or duplicated (providerIDs and the simulator's instances compared),
// every pod Running, and no admission request failed during the roll.
func TestHelmUpgradeRollback(t *testing.T) {
	cluster.SkipWithoutControlPlane(t) // before building the previous version
	prev := loadPreviousRelease(t, repoRoot(t))
	t.Logf("previous version: %s", prev.source)
	e := newEnvWith(t, "karpx-helm-upgrade", envOptions{noAutoscaler: true, crds: installCRDChart(t, prev.crd)})
	e.helmSystemNode()
	w := e.newChartWebhook()
	helm := newHelmClient(t, e.cluster, helmNamespace, w.renderer())
	crdHelm := newHelmClient(t, e.cluster, helmNamespace, nil)
	values := helmValues(e.name)
	helm.install(e.ctx, "karpx", prev.karpx, values)
	w.start(prev.webhook)
	w.start(prev.webhook)
	u := &upgradeRun{chaosEnv: chaosWorkload(e), webhook: w, kubeconfig: e.chartServiceAccountKubeconfig(helmNamespace, chartControllerSA)}
	u.controller = e.startControllerBinary(prev.controller, u.kubeconfig, "controller-previous-0", "--leader-elect=true")
	u.replicas = 2
	u.scale(u.replicas, 180*time.Second)

	crd, karpx := loadChart(t, repoChartDir(t, "karpx-crd")), loadChart(t, e.chartDir("karpx"))
	u.step("upgrade", fmt.Sprintf("%s→%s", prev.karpx.Metadata.Version, karpx.Metadata.Version), "karpx-webhook", "karpx-controller", func() (*release.Release, *release.Release) {
		return crdHelm.upgrade(e.ctx, "karpx-crd", crd, nil), helm.upgrade(e.ctx, "karpx", karpx, values)
	})
	u.step("rollback", fmt.Sprintf("%s→%s", karpx.Metadata.Version, prev.karpx.Metadata.Version), prev.webhook, prev.controller, func() (*release.Release, *release.Release) {
		// Reverse order: the chart that uses the CRDs first.
		k := helm.rollback("karpx", 1)
		return crdHelm.rollback("karpx-crd", 1), k
	})
}

// upgradeRun is TestHelmUpgradeRollback's state.
type upgradeRun struct {
	*chaosEnv
	webhook    *chartWebhook
	kubeconfig string
	controller *process
	replicas   int32
	started    int
}

// step runs one version change: a drift of every node and one more pod,
// then change (helm upgrade or rollback; it returns the karpx-crd and
// karpx releases it made) while the load generator sends admission
// requests, the webhook replicas roll to webhookBin and the controller
// hands over to controllerBin; then it waits until the fleet has
// converged and checks and logs the figures.
func (u *upgradeRun) step(name, versions, webhookBin, controllerBin string, change func() (crd, karpx *release.Release)) {
	t := u.t
	t.Helper()
	before := u.settleFleet()
	generation := u.webhookGeneration()

	// The disruption in progress and a pending pod.
	if _, err := u.cluster.Kubectl(u.ctx, nil, "patch", "nodepool", "chaos", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{"karpx.io/e2e-step":%q}}}}}`, name)); err != nil {
		t.Fatal(err)
	}
	u.replicas++
	u.setReplicas(u.replicas)
	drifting := u.awaitDrift(90 * time.Second)
	pending := u.pendingPods()

	load := u.startAdmissionLoad(name)
	crd, karpx := change()
	roll := u.webhook.roll(webhookBin)
	handover := u.handOver(controllerBin)
	load.stop()

	u.converge(name, 8*time.Minute)
	after := u.settleFleet()
	rolled := u.webhookGeneration() != generation
	if after.lost != 0 || after.duplicated != 0 || after.leaked != 0 {
		t.Errorf("%s: %s, want nothing lost, duplicated or leaked", name, after)
	}
	if load.failed.Load() != 0 {
		t.Errorf("%s: %d admission requests failed during the webhook roll with 2 replicas, want 0: %s", name, load.failed.Load(), strings.Join(load.errors(), "; "))
	}
	if load.denied.Load() == 0 {
		t.Errorf("%s: no unsafe EC2NodeClass was denied during the roll: the webhook was not in the admission path", name)
	}
	scenarioLogf(t, "helm %s %s: crdRevision=%d karpxRevision=%d webhookDeploymentRolled=%v driftInProgress=%v pendingPods=%d before: %s after: %s admissions: %s serviceConnections=%d serviceRefused=%d webhook %s controllerHandover=%s",
		name, versions, crd.Version, karpx.Version, rolled, drifting, pending, before.counts(), after, load,
		u.webhook.svc.conns.Load(), u.webhook.svc.refused.Load(), roll, handover.Round(100*time.Millisecond))
}

// webhookGeneration returns Deployment karpx-webhook's generation (it
// changes when an upgrade changes its pod template).
func (u *upgradeRun) webhookGeneration() int64 {
	var d unstructured.Unstructured
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	if err := u.kube.Get(u.ctx, types.NamespacedName{Namespace: helmNamespace, Name: "karpx-webhook"}, &d); err != nil {
		u.t.Fatal(err)
	}
	return d.GetGeneration()
}

// awaitDrift waits until a NodeClaim is Drifted or being deleted, and
// reports whether one was within timeout.
func (u *upgradeRun) awaitDrift(timeout time.Duration) bool {
	err := wait.PollUntilContextTimeout(u.ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		if err := u.kube.List(ctx, &claims); err != nil {
			return false, nil
		}
		for _, nc := range claims.Items {
			if !nc.DeletionTimestamp.IsZero() || nc.StatusConditions().IsTrue(karpv1.ConditionTypeDrifted) {
				return true, nil
			}
		}
		return false, nil
	})
	return err == nil
}

// pendingPods counts the workload's pods not yet scheduled.
func (u *upgradeRun) pendingPods() int {
	var pods corev1.PodList
	if err := u.kube.List(u.ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "chaos"}); err != nil {
		u.t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			n++
		}
	}
	return n
}

// handOver starts a controller of binary as a standby, stops the current
// one with SIGTERM (it releases its Lease) and returns how long until the
// new process holds the Lease.
func (u *upgradeRun) handOver(binary string) time.Duration {
	t := u.t
	t.Helper()
	holder, _ := u.lease(u.ctx)
	if holder == "" {
		t.Fatal("no controller holds the leader Lease before the handover")
	}
	u.started++
	next := u.startControllerBinary(binary, u.kubeconfig, fmt.Sprintf("controller-%d", u.started), "--leader-elect=true")
	start := time.Now()
	u.controller.signal(syscall.SIGTERM)
	if code := u.controller.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("controller %s exited with code %d after SIGTERM, want 0", u.controller.name, code)
	}
	u.controller = next
	u.eventually(maxTakeover+30*time.Second, "the new controller holds the Lease", func(ctx context.Context) (bool, error) {
		h, _ := u.lease(ctx)
		return h != "" && h != holder, nil
	})
	return time.Since(start)
}

// converge waits until every workload pod is Running on a node of the
// NodePool's current template (label karpx.io/e2e-step=step) and every
// managed node has one.
func (u *upgradeRun) converge(step string, within time.Duration) {
	u.t.Helper()
	u.waitRunning(u.replicas, within)
	u.eventually(within, "every node replaced by the drift of step "+step, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := u.kube.List(ctx, &nodes, client.HasLabels{karpv1.NodePoolLabelKey}); err != nil {
			return false, nil
		}
		for _, n := range nodes.Items {
			if n.Labels["karpx.io/e2e-step"] != step {
				return false, nil
			}
		}
		return len(nodes.Items) > 0, nil
	})
}

// fleetFigures count the fleet: NodeClaims, managed Nodes and live
// instances, and the broken invariants: lost (a NodeClaim whose instance
// is gone or that has no Node, a Node no NodeClaim owns), duplicated (a
// providerID on two NodeClaims or two Nodes, a second instance tagged for
// one NodeClaim) and leaked (a live instance no NodeClaim claims).
type fleetFigures struct {
	nodeClaims, nodes, instances, lost, duplicated, leaked int
}

func (f fleetFigures) counts() string {
	return fmt.Sprintf("nodeClaims=%d nodes=%d instances=%d", f.nodeClaims, f.nodes, f.instances)
}

func (f fleetFigures) String() string {
	return fmt.Sprintf("%s lost=%d duplicated=%d leaked=%d", f.counts(), f.lost, f.duplicated, f.leaked)
}

// fleet counts the fleet now.
func (u *upgradeRun) fleet() fleetFigures {
	cf := u.figures()
	f := fleetFigures{nodeClaims: cf.nodeClaims, instances: cf.instances, lost: cf.nodeClaimsLost, duplicated: cf.duplicates, leaked: cf.leaked}
	var claims karpv1.NodeClaimList
	if err := u.kube.List(u.ctx, &claims); err != nil {
		u.t.Fatal(err)
	}
	claimed := map[string]int{}
	for _, nc := range claims.Items {
		if nc.Status.ProviderID == "" {
			continue
		}
		if claimed[nc.Status.ProviderID]++; claimed[nc.Status.ProviderID] == 2 {
			f.duplicated++
		}
	}
	var nodes corev1.NodeList
	if err := u.kube.List(u.ctx, &nodes, client.HasLabels{karpv1.NodePoolLabelKey}); err != nil {
		u.t.Fatal(err)
	}
	f.nodes = len(nodes.Items)
	onNode := map[string]int{}
	for _, n := range nodes.Items {
		if onNode[n.Spec.ProviderID]++; onNode[n.Spec.ProviderID] == 2 {
			f.duplicated++
		}
		if claimed[n.Spec.ProviderID] == 0 {
			f.lost++
		}
	}
	for id := range claimed {
		if onNode[id] == 0 {
			f.lost++
		}
	}
	return f
}

// settleFleet waits up to 60 s until nothing is lost, duplicated or
// leaked (a NodeClaim registering, a Node terminating) and returns the
// figures then.
func (u *upgradeRun) settleFleet() fleetFigures {
	var f fleetFigures
	_ = wait.PollUntilContextTimeout(u.ctx, time.Second, 60*time.Second, true, func(context.Context) (bool, error) {
		f = u.fleet()
		return f.lost == 0 && f.duplicated == 0 && f.leaked == 0, nil
	})
	return f
}

// admissionLoad sends admission requests through the API server until
// stopped: EC2NodeClass and NodePool updates that change spec (so the
// validating and mutating webhooks are called) and creates of an
// EC2NodeClass with unsafe userData, which the webhook must deny. A
// request that fails otherwise (e.g. "failed calling webhook", the
// failurePolicy Fail answer when no replica answers) counts as failed.
type admissionLoad struct {
	ok, denied, failed atomic.Int64
	mu                 sync.Mutex
	failures           []string
	cancel             context.CancelFunc
	done               sync.WaitGroup
}

func (l *admissionLoad) String() string {
	return fmt.Sprintf("requests=%d admitted=%d denied=%d failed=%d", l.ok.Load()+l.denied.Load()+l.failed.Load(), l.ok.Load(), l.denied.Load(), l.failed.Load())
}

// errors returns the first failures' messages.
func (l *admissionLoad) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.failures...)
}

func (l *admissionLoad) fail(format string, args ...any) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) < 5 {
		l.failures = append(l.failures, fmt.Sprintf(format, args...))
	}
}

// stop stops the load and waits for its last requests.
func (l *admissionLoad) stop() {
	l.cancel()
	l.done.Wait()
}

// loadNodePool is the load's NodePool: tainted and limited to no CPU, so
// no pod lands on it and nothing is launched for it.
const loadNodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: NAME}
spec:
  limits: {cpu: "0"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: chaos}
      taints: [{key: karpx.io/load, effect: NoSchedule}]
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
`

// startAdmissionLoad creates the load's objects (named load-TAG) and
// starts one worker per kind of request.
func (u *upgradeRun) startAdmissionLoad(tag string) *admissionLoad {
	t := u.t
	t.Helper()
	decode := func(doc string) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	name := "load-" + tag
	for _, obj := range []*unstructured.Unstructured{decode(ec2NodeClassYAML(name, u.name)), decode(strings.ReplaceAll(loadNodePool, "NAME", name))} {
		if err := u.kube.Create(u.ctx, obj); err != nil {
			t.Fatalf("creating the load's %s: %v", obj.GetKind(), err)
		}
	}
	ctx, cancel := context.WithCancel(u.ctx)
	l := &admissionLoad{cancel: cancel}
	patch := func(kind, apiVersion, body string) func(i int) {
		return func(i int) {
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(apiVersion)
			obj.SetKind(kind)
			obj.SetName(name)
			err := u.kube.Patch(ctx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, body, i)))
			switch {
			case ctx.Err() != nil:
			case err != nil:
				l.fail("%s update: %v", kind, err)
			default:
				l.ok.Add(1)
			}
		}
	}
	unsafe := strings.ReplaceAll(webhookUnsafeNodeClass(u.name), "chaos-unsafe", "load-unsafe-"+tag)
	workers := []func(i int){
		patch("EC2NodeClass", "karpenter.k8s.aws/v1", `{"spec":{"tags":{"karpx.io/load":"%d"}}}`),
		patch("NodePool", "karpenter.sh/v1", `{"spec":{"template":{"metadata":{"labels":{"karpx.io/load":"%d"}}}}}`),
		func(int) {
			obj := decode(unsafe)
			err := u.kube.Create(ctx, obj)
			switch {
			case ctx.Err() != nil:
			case err == nil:
				l.fail("the unsafe EC2NodeClass was admitted")
				_ = u.kube.Delete(u.ctx, obj)
			case strings.Contains(err.Error(), "denied the request"):
				l.denied.Add(1)
			default:
				l.fail("unsafe EC2NodeClass create: %v", err)
			}
		},
	}
	for _, work := range workers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for i := 0; ctx.Err() == nil; i++ {
				work(i)
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	return l
}
