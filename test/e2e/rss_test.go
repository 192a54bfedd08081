package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
)

var (
	rssNodes        = flag.Int("karpx.rss-nodes", 0, "TestControllerRSS: Nodes (with NodeClaims) to create (0 skips the test; make bench-rss sets 2000)")
	rssPodsPerNode  = flag.Int("karpx.rss-pods-per-node", 10, "TestControllerRSS: pods bound to each Node")
	rssSettle       = flag.Duration("karpx.rss-settle", 45*time.Second, "TestControllerRSS: how long the controller runs after its provisioning pass (disruption passes every 10s)")
	rssKwokWait     = flag.Duration("karpx.rss-kwok-wait", 4*time.Minute, "TestControllerRSS: how long kwok may take to mark the pods Running before the rest get status Running directly")
	rssHeapProfile  = flag.String("karpx.rss-heap-profile", "", "TestControllerRSS: write the controller's heap profiles (pprof) to this file at the end and to this file + \".ready\" once it is ready")
	rssGoMemLimit   = flag.Bool("karpx.rss-gomemlimit", true, "TestControllerRSS: run the controller with the GOMEMLIMIT manifests/controller/deployment.yaml gives it (false: without, to measure what it does)")
	rssControllerBn = flag.String("karpx.controller-binary", "", "TestControllerRSS: karpx-controller binary to run (default: bin/karpx-controller)")
)

// rssManifests is the RSS test's NodePool (its EC2NodeClass "rss" is
// minimal): m5.4xlarge on-demand nodes, one wave label each.
var rssManifests = nodePool{Name: "rss", Disruption: "{consolidationPolicy: WhenEmpty, consolidateAfter: 30s}",
	Requirements:  []string{"{key: karpx.dev/wave, operator: Exists}"},
	InstanceTypes: []string{"m5.4xlarge"}, CapacityTypes: []string{onDemand}}.yaml()

// TestControllerRSS is the scripted measurement behind `make bench-rss`:
// the memory of bin/karpx-controller, in its own process, in a cluster of
// -karpx.rss-nodes Nodes (kwok keeps them Ready) with their Initialized
// NodeClaims, each Node carrying -karpx.rss-pods-per-node pods (created
// bound, in parallel; kwok marks them Running). The controller starts once
// they exist, becomes ready (informers synced, catalogue loaded), runs a
// provisioning pass for 20 new pending pods and disruption passes for
// -karpx.rss-settle. It prints the peak RSS (VmHWM), the RSS at the end
// (VmRSS, and its anonymous and file-backed parts), the Go heap in use
// (go_memstats_heap_inuse_bytes from /metrics), the controller's CPU time,
// and from its GODEBUG=gctrace=1 lines the GC cycles, the share of time in
// GC and the largest live heap. The NodeClaims' instances are not in the simulator, so
// garbage collection gets a one-hour grace (it would delete them after
// five minutes). The controller runs with the GOMEMLIMIT that
// manifests/controller/deployment.yaml gives its container (printed), or
// with none under -karpx.rss-gomemlimit=false. It asserts only that the
// controller ran; the figures are
// for docs/performance.md (goal: at most 300 MiB with 2,000 nodes and
// 20,000 pods).
func TestControllerRSS(t *testing.T) {
	nodes := *rssNodes
	if nodes <= 0 {
		t.Skip("a scripted measurement: run with -karpx.rss-nodes N (make bench-rss)")
	}
	// Its own control plane: thousands of objects, more than a reset of
	// the shared one should delete.
	e := newEnvWith(t, "karpx-rss", envOptions{noAutoscaler: true, ownControlPlane: true})
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	controller := *rssControllerBn
	if controller == "" {
		controller = filepath.Join(bin, "karpx-controller")
	}
	if _, err := os.Stat(controller); err != nil {
		t.Fatalf("%v: run make build", err)
	}
	e.apply(ec2NodeClassYAML("rss", e.name), rssManifests)

	start := time.Now()
	pods := populateCluster(e.ctx, t, e.cluster.RESTConfig, nodes, *rssPodsPerNode)
	t.Logf("created %d Nodes, %d NodeClaims and %d bound pods in %s", nodes, nodes, pods, time.Since(start).Round(time.Second))
	byKwok, direct := markRunning(e.ctx, t, e.cluster.RESTConfig, e.kube, pods, *rssKwokWait)
	t.Logf("pods Running %s after creation began: %d marked by kwok, %d given status Running directly after waiting %s for kwok",
		time.Since(start).Round(time.Second), byKwok, direct, *rssKwokWait)

	// The controller, as in a cluster: its own process, ServiceAccount
	// karpx/karpx with manifests/controller's RBAC.
	saConfig := cluster.ServiceAccountForTest(t, e.cluster.RESTConfig, filepath.Join(e.root, "manifests", "controller"), "karpx", "karpx")
	kubeconfig := filepath.Join(t.TempDir(), "karpx-controller.kubeconfig")
	if err := cluster.WriteKubeconfig(saConfig, kubeconfig); err != nil {
		t.Fatal(err)
	}
	metricsAddr, probeAddr, pprofAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	logPath := filepath.Join(t.TempDir(), "karpx-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(e.ctx, controller,
		"--kubeconfig", kubeconfig, "--cluster-name", e.name, "--cluster-endpoint", e.cluster.RESTConfig.Host,
		"--ec2-endpoint", e.endpoint, "--leader-elect=false", "--gc-grace", "1h",
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr, "--pprof-bind-address", pprofAddr)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIAEXAMPLEKARPXSIM00", "AWS_SECRET_ACCESS_KEY=karpx-simulator-secret", "GOMEMLIMIT=off",
		// The status endpoints (default :8082) off; by the environment,
		// which a binary older than --status-bind-address ignores.
		"STATUS_BIND_ADDRESS=0",
		// One line per GC cycle on stderr (the log file): gcTrace reads the
		// cycle count and the share of CPU spent in GC from the last one.
		"GODEBUG=gctrace=1")
	if *rssGoMemLimit {
		limit, memory := deploymentMemory(t, filepath.Join(e.root, "manifests", "controller", "deployment.yaml"), "controller")
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+limit)
		t.Logf("controller env from manifests/controller/deployment.yaml: GOMEMLIMIT=%s (container memory limit %s)", limit, memory)
	} else {
		t.Logf("controller runs without GOMEMLIMIT (-karpx.rss-gomemlimit=false)")
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				cluster.FailureLog(t, "karpx-controller", b)
			}
		}
	})
	pid := cmd.Process.Pid
	started := time.Now()
	e.eventually(5*time.Minute, "karpx-controller ready (informers synced, catalogue loaded)", func(ctx context.Context) (bool, error) {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	ready := time.Since(started)
	readyRSS, _ := procStatusKiB(pid, "VmRSS")
	if *rssHeapProfile != "" {
		if err := download("http://"+pprofAddr+"/debug/pprof/heap", *rssHeapProfile+".ready"); err != nil {
			t.Errorf("heap profile: %v", err)
		}
	}

	// One provisioning pass with the whole cluster in its state: 20 pending
	// pods that need a new node.
	for i := range 20 {
		p := rssPod(fmt.Sprintf("rss-pending-%d", i), "")
		p.Spec.NodeSelector = map[string]string{"karpx.dev/wave": "rss"}
		if err := e.kube.Create(e.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(3*time.Minute, "a NodeClaim for the pending pods", func(ctx context.Context) (bool, error) {
		var list karpv1.NodeClaimList
		if err := e.kube.List(ctx, &list, client.MatchingLabels{"karpx.dev/wave": "rss"}); err != nil {
			return false, err
		}
		return len(list.Items) > 0, nil
	})
	time.Sleep(*rssSettle)

	steady, err := procStatusKiB(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	peak, err := procStatusKiB(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	// /metrics is authenticated by default (--metrics-secure).
	heap := scrapeMetric(t, "https://"+metricsAddr+"/metrics", e.metricsReaderToken(), "go_memstats_heap_inuse_bytes")
	if *rssHeapProfile != "" {
		if err := download("http://"+pprofAddr+"/debug/pprof/heap", *rssHeapProfile); err != nil {
			t.Errorf("heap profile: %v", err)
		}
	}
	anon, _ := procStatusKiB(pid, "RssAnon")
	file, _ := procStatusKiB(pid, "RssFile")
	cpu, err := procCPUSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := gcTrace(logPath)
	if err != nil {
		t.Fatal(err)
	}
	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	scenarioLogf(t, "controller memory with %d Nodes/NodeClaims and %d pods (+20 pending): ready after %s at RSS %.0f MiB; peak RSS (VmHWM) %.0f MiB, RSS after %s of passes %.0f MiB (anonymous %.0f MiB, file-backed %.0f MiB), Go heap in use %.0f MiB (goal <= 300 MiB)",
		nodes, pods, ready.Round(time.Second), mib(readyRSS), mib(peak), *rssSettle, mib(steady), mib(anon), mib(file), heap/(1<<20))
	scenarioLogf(t, "controller CPU %.1f s in %s; %d GC cycles, %d%% of the process's time in GC; live heap after GC at most %d MB, last %d MB (next goal %d MB) (gctrace)",
		cpu, time.Since(started).Round(time.Second), gc.Cycles, gc.Percent, gc.MaxLive, gc.LastLive, gc.LastGoal)
}

// gcTraceLine matches the runtime's GODEBUG=gctrace=1 summary line: "gc
// CYCLE @SECONDSs PERCENT%: … ms cpu, START->END->LIVE MB, GOAL MB goal, …",
// PERCENT being the share of time spent in GC since the program started
// and LIVE the heap marked live by the cycle (runtime package
// documentation).
var gcTraceLine = regexp.MustCompile(`^gc (\d+) @[0-9.]+s (\d+)%: .* (\d+)->(\d+)->(\d+) MB, (\d+) MB goal`)

// gcSummary is what gcTrace reads from a gctrace log.
type gcSummary struct {
	// Cycles is the number of GC cycles.
	Cycles int
	// Percent is the share of the process's time spent in GC (whole
	// percent, over the process's life).
	Percent int
	// MaxLive is the largest heap marked live by a cycle, in MB (10^6
	// bytes, as gctrace prints).
	MaxLive int
	// LastLive and LastGoal are the last cycle's live heap and next heap
	// goal, in MB.
	LastLive, LastGoal int
}

// gcTrace reads the gctrace lines of the log at path. It returns an error
// when the log holds none.
func gcTrace(path string) (gcSummary, error) {
	var s gcSummary
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		m := gcTraceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n := make([]int, len(m))
		for i := 1; i < len(m); i++ {
			n[i], _ = strconv.Atoi(m[i])
		}
		s.Cycles, s.Percent, s.LastLive, s.LastGoal = n[1], n[2], n[5], n[6]
		s.MaxLive = max(s.MaxLive, n[5])
	}
	if s.Cycles == 0 {
		return s, fmt.Errorf("no gctrace line in %s", path)
	}
	return s, nil
}

// procCPUSeconds returns the user+system CPU time of process pid, in
// seconds, from /proc/PID/stat (fields 14 and 15, in clock ticks of
// 1/100 s: USER_HZ on Linux).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start after its closing parenthesis, at field 3.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return float64(utime+stime) / 100, nil
}

// markRunning waits up to wait for kwok to mark the want pods of app=rss
// Running, then gives the rest status Running (scheduled, ready, with an
// IP) through the status subresource, 64 requests in flight. It returns
// how many kwok marked and how many were set directly.
func markRunning(ctx context.Context, t *testing.T, admin *rest.Config, kube client.Client, want int, wait time.Duration) (byKwok, direct int) {
	t.Helper()
	var pending []corev1.Pod
	deadline := time.Now().Add(wait)
	for {
		var list corev1.PodList
		if err := kube.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{"app": "rss"}); err != nil {
			t.Fatal(err)
		}
		pending = pending[:0]
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodRunning {
				pending = append(pending, p)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			byKwok = len(list.Items) - len(pending)
			break
		}
		time.Sleep(5 * time.Second)
	}
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range pending {
		g.Go(func() error {
			p := &pending[i]
			orig := p.DeepCopy()
			now := metav1.Now()
			p.Status.Phase = corev1.PodRunning
			p.Status.HostIP, p.Status.PodIP = "10.0.0.1", fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
			p.Status.StartTime = &now
			p.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
			return c.Status().Patch(gctx, p, client.MergeFrom(orig))
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if byKwok+len(pending) != want {
		t.Fatalf("%d pods found, want %d", byKwok+len(pending), want)
	}
	return byKwok, len(pending)
}

// rssPod is a 100m/128Mi pause pod, bound to node unless node is empty.
func rssPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "rss"}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}},
		},
	}
}

// populateCluster creates nodes Initialized NodeClaims of NodePool "rss"
// with their kwok-managed m5.4xlarge Nodes, and podsPerNode pods bound to
// each, with 64 requests in flight and no client-side rate limit. It
// returns the number of pods.
func populateCluster(ctx context.Context, t *testing.T, admin *rest.Config, nodes, podsPerNode int) int {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range nodes {
		g.Go(func() error { return createNode(gctx, c, i, podsPerNode) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return nodes * podsPerNode
}

func createNode(ctx context.Context, c client.Client, i, pods int) error {
	name := fmt.Sprintf("rss-%05d", i)
	zone := []string{"us-east-1a", "us-east-1b", "us-east-1c"}[i%3]
	providerID := fmt.Sprintf("aws:///%s/i-%017x", zone, i+1)
	labels := map[string]string{
		karpv1.NodePoolLabelKey: "rss", "karpenter.k8s.aws/ec2nodeclass": "rss", "karpx.dev/wave": "existing",
		corev1.LabelInstanceTypeStable: "m5.4xlarge", corev1.LabelTopologyZone: zone, corev1.LabelTopologyRegion: "us-east-1",
		karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
		corev1.LabelHostname: name, karpv1.NodeRegisteredLabelKey: "true", karpv1.NodeInitializedLabelKey: "true",
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("234")}
	allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15890m"), corev1.ResourceMemory: resource.MustParse("57Gi"), corev1.ResourcePods: resource.MustParse("234")}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "rss"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.4xlarge"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	if err := c.Create(ctx, nc); err != nil {
		return err
	}
	now := metav1.Now()
	nc.Status.ProviderID, nc.Status.NodeName = providerID, name
	nc.Status.Capacity, nc.Status.Allocatable = capacity, allocatable
	for _, cond := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		nc.Status.Conditions = append(nc.Status.Conditions, status.Condition{Type: cond, Status: metav1.ConditionTrue, Reason: cond, LastTransitionTime: now})
	}
	if err := c.Status().Update(ctx, nc); err != nil {
		return err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{ec2sim.KwokNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
	if err := c.Create(ctx, node); err != nil {
		return err
	}
	// kwok patches the status at the same time: a patch, not an update.
	orig := node.DeepCopy()
	node.Status.Capacity, node.Status.Allocatable = capacity, allocatable
	if err := c.Status().Patch(ctx, node, client.MergeFrom(orig)); err != nil {
		return err
	}
	for p := range pods {
		if err := c.Create(ctx, rssPod(fmt.Sprintf("%s-%d", name, p), name)); err != nil {
			return err
		}
	}
	return nil
}

// procStatusKiB reads a "FIELD: N kB" field (VmRSS, VmHWM, RssAnon…) of
// /proc/PID/status.
func procStatusKiB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// scrapeMetric returns the value of an unlabelled metric on a Prometheus
// text endpoint.
func scrapeMetric(t *testing.T, url, token, name string) float64 {
	t.Helper()
	req, err := newMetricsRequest(context.Background(), url, token)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("%s not on %s", name, url)
	return 0
}

func download(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// deploymentMemory returns the GOMEMLIMIT value and the memory limit that
// the Deployment in the multi-document YAML file at path gives its
// container named container, so the measurement runs the binary as the
// Deployment does. It fails t when either is missing or the GOMEMLIMIT is
// not a literal value.
func deploymentMemory(t *testing.T, path, container string) (goMemLimit, memoryLimit string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != container {
				continue
			}
			mem := c.Resources.Limits.Memory()
			for _, env := range c.Env {
				if env.Name == "GOMEMLIMIT" && env.Value != "" {
					return env.Value, mem.String()
				}
			}
			t.Fatalf("%s: container %s has no literal GOMEMLIMIT env", path, container)
		}
	}
	t.Fatalf("%s: no Deployment with a container %s", path, container)
	return "", ""
}
