package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// Binaries are the executables a cluster needs, looked up in BinDir.
var Binaries = []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// BinDir returns the repository's bin/ directory, found by walking up from
// the working directory to the karpx go.mod. It returns an error when no
// go.mod of module github.com/karpx/karpx is found.
func BinDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/karpx/karpx\n")) {
			return filepath.Join(dir, "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("karpx go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Missing returns the Binaries absent from dir.
func Missing(dir string) []string {
	var missing []string
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	return missing
}

// Cluster is a running local control plane.
type Cluster struct {
	// Name is the kwokctl cluster name.
	Name string
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// RESTConfig is the admin client configuration.
	RESTConfig *rest.Config

	bin      string
	workdir  string
	ports    Ports
	removals bool
}

// Options configure Start.
type Options struct {
	// Name is the cluster name; it must be unique among running clusters of
	// the same Workdir.
	Name string
	// Workdir holds kwokctl's state (certificates, logs, etcd data) and the
	// configuration Start writes for it. Start creates it (and its parents)
	// when it does not exist yet. Default: a new temporary directory.
	Workdir string
	// BinDir holds the binaries. Default: BinDir().
	BinDir string
	// Timeout bounds the start. Default 2 minutes.
	Timeout time.Duration
	// AuditUsers, when set, turns on kube-apiserver's audit log for these
	// users' requests (AuditPolicy); Cluster.AuditLog is its path.
	AuditUsers []string
	// AuditRemovals, when set, also logs every pod deletion and eviction
	// and every write to a Node object, by any user (see removalRules);
	// Removals reads them and FailureLogs writes them for a failed test.
	AuditRemovals bool
	// LeaderElection keeps kube-scheduler's and kube-controller-manager's
	// leader election on (their default); off unless set, see
	// kwokctlConfig. Only the control of the test that shows why it is off
	// sets it.
	LeaderElection bool
	// KwokPodWorkers is how many pods kwok's controller plays through
	// their stages at once (kwok v0.8.0's podPlayStageParallelism): each
	// worker waits on one pod status PATCH, so with kwok's default of 4 a
	// wave of pods bound to newly Ready Nodes queues in kwok, where real
	// kubelets, one per Node, would start them side by side. 0 keeps
	// kwok's default; the head-to-head sets it for every side alike.
	KwokPodWorkers uint
	// KwokNodeWorkers is how many Nodes kwok's controller plays through
	// their stages at once (kwok v0.8.0's nodePlayStageParallelism, whose
	// node-initialize stage posts a Node's Ready condition): with kwok's
	// default of 4 a wave of Nodes registered within a second queues in
	// kwok before Ready, where each real kubelet posts its own. 0 keeps
	// kwok's default; the head-to-head sets it for every side alike.
	KwokNodeWorkers uint
}

// kwokctlConfig is the KwokctlConfiguration (kwok v0.8.0's
// config.kwok.x-k8s.io/v1alpha1) every cluster starts with: kube-scheduler
// and kube-controller-manager run with leader election as leaderElect says,
// off unless Options.LeaderElection. Each runs as a single process that
// nothing restarts (kwokctl's binary runtime has no kubelet to do it), and
// with leader election on, each exits for good when it cannot renew its
// Lease within its renew deadline (10 s, the components' default), which an
// API server restart under load (RestartAPIServer) can exceed: the cluster
// would then schedule no pod and clear no not-ready taint again. The
// components listen on ports (pickPorts), not on kwokctl's own choice.
// kwokctl runs the kwok controller with --manage-all-nodes; it is also
// told to leave alone the status of Nodes annotated
// kwok.x-k8s.io/status=custom, which ec2sim sets while it plays a kubelet
// that is not ready (ec2sim.KwokStatusAnnotation): without it kwok's
// node-initialize stage turns such a Node's Ready back to True at once.
//
// With workers set (kwokWorkers) a KwokConfiguration document follows,
// which kwokctl hands to the kwok controller as it is: kwok then applies no
// defaults to its options, so it carries kwok v0.8.0's defaults
// (pkg/apis/config/v1alpha1/zz_generated.defaults.go) for every field the
// controller reads besides podPlayStageParallelism and
// nodePlayStageParallelism.
func kwokctlConfig(leaderElect bool, ports Ports, workers kwokWorkers) string {
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  etcdPort: %[2]d
  etcdPeerPort: %[3]d
  kubeApiserverPort: %[4]d
  kubeControllerManagerPort: %[5]d
  kubeSchedulerPort: %[6]d
  kwokControllerPort: %[7]d
componentsPatches:
- name: kube-scheduler
  extraArgs:
  - {key: leader-elect, value: "%[1]t"}
- name: kube-controller-manager
  extraArgs:
  - {key: leader-elect, value: "%[1]t"}
- name: kwok-controller
  extraArgs:
  - {key: disregard-status-with-annotation-selector, value: "%[8]s=%[9]s"}
`, leaderElect, ports.Etcd, ports.EtcdPeer, ports.APIServer,
		ports.ControllerManager, ports.Scheduler, ports.KwokController,
		"kwok.x-k8s.io/status", "custom") + // ec2sim.KwokStatusAnnotation, ec2sim.KwokStatusCustom
		kwokConfig(workers)
}

// kwokWorkers is how many pods and Nodes kwok's controller plays through
// their stages at once (Options.KwokPodWorkers, Options.KwokNodeWorkers);
// 0 is kwok's default, 4, for either.
type kwokWorkers struct{ pods, nodes uint }

// kwokDefaultWorkers is kwok v0.8.0's default podPlayStageParallelism and
// nodePlayStageParallelism (pkg/apis/config/v1alpha1/zz_generated.defaults.go).
const kwokDefaultWorkers = 4

// kwokConfig returns the KwokConfiguration document of kwokctlConfig, or ""
// when both of workers are kwok's defaults (0).
func kwokConfig(workers kwokWorkers) string {
	if workers.pods == 0 && workers.nodes == 0 {
		return ""
	}
	orDefault := func(n uint) uint {
		if n == 0 {
			return kwokDefaultWorkers
		}
		return n
	}
	return fmt.Sprintf(`---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.0/24
  nodePlayStageParallelism: %d
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enableDebuggingHandlers: true
  enableProfilingHandler: true
  podPlayStageParallelism: %d
`, orDefault(workers.nodes), orDefault(workers.pods))
}

// Start creates and starts a cluster. It returns an error naming the
// missing binaries (fix: `make tools`), or kwokctl's output when the start
// fails.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = "karpx"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.BinDir == "" {
		dir, err := BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	if m := Missing(opts.BinDir); len(m) > 0 {
		return nil, fmt.Errorf("missing %s in %s: run `make tools`", strings.Join(m, ", "), opts.BinDir)
	}
	if opts.Workdir == "" {
		dir, err := os.MkdirTemp("", "karpx-cluster-")
		if err != nil {
			return nil, err
		}
		opts.Workdir = dir
	} else if err := os.MkdirAll(opts.Workdir, 0o700); err != nil {
		// The caller's Workdir need not exist yet (hack/demo passes
		// .demo/cluster): Start writes its kwokctl and audit configuration
		// there before kwokctl creates anything.
		return nil, fmt.Errorf("creating the cluster Workdir: %w", err)
	}
	ports, err := pickPorts()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: opts.Name, bin: opts.BinDir, workdir: opts.Workdir, ports: ports,
		Kubeconfig: filepath.Join(opts.Workdir, "kubeconfig"), removals: opts.AuditRemovals}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	b := func(name string) string { return filepath.Join(opts.BinDir, name) }
	var audit []string
	if len(opts.AuditUsers) > 0 || opts.AuditRemovals {
		policy := filepath.Join(opts.Workdir, opts.Name+"-audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy(opts.AuditUsers, opts.AuditRemovals)), 0o600); err != nil {
			return nil, err
		}
		audit = []string{"--kube-audit-policy", policy}
	}
	config := filepath.Join(opts.Workdir, opts.Name+"-kwokctl.yaml")
	if err := os.WriteFile(config, []byte(kwokctlConfig(opts.LeaderElection, ports, kwokWorkers{pods: opts.KwokPodWorkers, nodes: opts.KwokNodeWorkers})), 0o600); err != nil {
		return nil, err
	}
	_, err = c.kwokctl(ctx, append([]string{"create", "cluster",
		"--config", config,
		"--runtime", "binary",
		"--kubeconfig", c.Kubeconfig,
		"--kube-apiserver-binary", b("kube-apiserver"),
		"--kube-controller-manager-binary", b("kube-controller-manager"),
		"--kube-scheduler-binary", b("kube-scheduler"),
		"--etcd-binary", b("etcd"),
		"--kwok-controller-binary", b("kwok"),
		"--disable-qps-limits",
		"--wait", "90s"}, audit...)...,
	)
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("reading kubeconfig %s: %w", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c.RESTConfig = cfg
	return c, nil
}

// Stop deletes the cluster and its working directory. It is safe to call
// more than once.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.kwokctl(ctx, "delete", "cluster")
	if rmErr := os.RemoveAll(c.workdir); err == nil {
		err = rmErr
	}
	return err
}

// SchedulerMetricsURL returns the address of kube-scheduler's /metrics,
// which kwokctl serves over HTTPS on loopback with a self-signed
// certificate and outside authorization
// (--authorization-always-allow-paths).
func (c *Cluster) SchedulerMetricsURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d/metrics", c.ports.Scheduler)
}

// AuditLog returns the path of kube-apiserver's audit log (JSON lines),
// written when the cluster was started with Options.AuditUsers or
// Options.AuditRemovals.
func (c *Cluster) AuditLog() string {
	return filepath.Join(c.workdir, "clusters", c.Name, "logs", "audit.log")
}

// Logs returns the last lines of a component's log ("kube-apiserver",
// "kube-scheduler", "kwok-controller", …), for test failure reports.
func (c *Cluster) Logs(component string) string {
	data, err := os.ReadFile(filepath.Join(c.workdir, "clusters", c.Name, "logs", component+".log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 50 {
		lines = lines[len(lines)-50:]
	}
	return strings.Join(lines, "\n")
}

// failureLogBytes bounds each component log FailureLogs writes: its last
// 4 MiB (kube-controller-manager's log at its default verbosity is a few
// KiB a test; kwok's tens).
const failureLogBytes = 4 << 20

// FailureLogs writes, for t with FailureLog, the logs of kube-scheduler,
// kube-controller-manager and the kwok controller (each its last
// failureLogBytes), and, when the cluster was started with
// Options.AuditRemovals, the pod deletions, evictions and Node writes of
// its audit log (Removals): what a failed test on this control plane
// needs from it.
func (c *Cluster) FailureLogs(t testing.TB) {
	t.Helper()
	for _, comp := range []string{"kube-scheduler", "kube-controller-manager", "kwok-controller"} {
		FailureLog(t, comp, c.logTail(comp, failureLogBytes))
	}
	if c.removals {
		records, err := Removals(c.AuditLog())
		if err != nil {
			t.Logf("reading the audit log's removals: %v", err)
		}
		FailureLog(t, "audit-removals", []byte(formatRemovals(records)))
	}
}

// logTail returns the last limit bytes of a component's log, or the read
// error as text.
func (c *Cluster) logTail(component string, limit int) []byte {
	data, err := os.ReadFile(filepath.Join(c.workdir, "clusters", c.Name, "logs", component+".log"))
	if err != nil {
		return []byte(err.Error())
	}
	return data[len(data)-min(len(data), limit):]
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--name", c.Name)
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kwokctl"), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.workdir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// StartAttempts is how many times StartForTest tries to start a control
// plane that passes Probe.
const StartAttempts = 3

// Probe checks that every component works before a test relies on it:
// a Node kwok manages must become Ready (kwok controller), a one-replica
// ReplicaSet must get its pod (kube-controller-manager) bound to that Node
// (kube-scheduler) and Running (kwok). A component that lost a port race
// with another cluster would otherwise fail the test much later and
// obscurely. It cleans up after itself and waits at most 90 s.
func (c *Cluster) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	kube, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	const name, ns = "karpx-probe", "kube-system"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"karpx.io/probe": "true"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the probe Node: %w", err)
	}
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"karpx.io/probe": "true"},
				Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}}}}}
	rsGone := func(ctx context.Context) (bool, error) {
		_, err := kube.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}
	_, err = kube.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// An earlier probe's ReplicaSet, still being deleted (a
		// restarted cluster keeps its etcd): wait for the garbage
		// collector, then create ours.
		if err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, rsGone); err == nil {
			_, err = kube.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("creating the probe ReplicaSet: %w", err)
	}
	running := func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		p := pods.Items[0]
		return p.Spec.NodeName == name && p.Status.Phase == corev1.PodRunning, nil
	}
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, running); err != nil {
		return fmt.Errorf("probe pod not Running on the probe Node (kwok controller, kube-scheduler or kube-controller-manager not working): %w", err)
	}
	fg := metav1.DeletePropagationForeground
	if err := kube.AppsV1().ReplicaSets(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		return fmt.Errorf("deleting the probe ReplicaSet: %w", err)
	}
	// Foreground deletion removes the ReplicaSet after its pod: once it
	// is gone, so is the pod, and a later probe (after a restart) can
	// create it again.
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, rsGone); err != nil {
		return fmt.Errorf("probe ReplicaSet and its pod not deleted: %w", err)
	}
	if err := kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the probe Node: %w", err)
	}
	return nil
}

// StartProbed starts a cluster with opts and checks that every component
// works (a Node kwok keeps Ready, a pod scheduled and Running on it),
// trying StartAttempts times in all; logf reports a failed attempt. It
// returns the last attempt's error.
func StartProbed(ctx context.Context, opts Options, logf func(format string, args ...any)) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := Start(ctx, opts)
		if err == nil {
			if err = c.Probe(ctx); err == nil {
				return c, nil
			}
			_ = c.Stop()
		}
		// A start can lose a race for a port with another cluster that
		// starts at the same moment (go test runs packages in parallel),
		// or overrun its timeout on a loaded machine: both are the
		// machine's, not the code under test's, so try again.
		if attempt == StartAttempts {
			return nil, fmt.Errorf("starting control plane (%d attempts): %w", attempt, err)
		}
		logf("starting control plane, attempt %d of %d failed, retrying: %v", attempt, StartAttempts, err)
	}
}

// SkipWithoutControlPlane skips t with -short and when the control-plane
// binaries are missing (run `make tools` or `make test`), and returns the
// directory holding them.
func SkipWithoutControlPlane(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped with -short")
	}
	dir, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if m := Missing(dir); len(m) > 0 {
		t.Skipf("%s not found in %s: run `make tools` (or `make test`, which builds them)", strings.Join(m, ", "), dir)
	}
	return dir
}

// StartForTest starts a control plane for t (retrying a start that fails
// or whose kwok controller does not work, StartAttempts times in all) and
// stops it when t ends. It skips t when the binaries are missing (run
// `make tools` or `make test`) and when -short is set.
func StartForTest(t testing.TB) *Cluster {
	t.Helper()
	return StartForTestAudited(t)
}

// StartForTestAudited is StartForTest with kube-apiserver's audit log on
// for the requests of auditUsers (none: no audit log), e.g.
// "system:serviceaccount:karpx:karpx"; see Cluster.AuditLog.
func StartForTestAudited(t testing.TB, auditUsers ...string) *Cluster {
	t.Helper()
	return StartForTestWith(t, Options{AuditUsers: auditUsers})
}

// StartForTestWith is StartForTestAudited with opts (Name and BinDir are
// set from t and SkipWithoutControlPlane).
func StartForTestWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	dir := SkipWithoutControlPlane(t)
	name := "karpx-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	opts.Name, opts.BinDir = strings.TrimRight(name, "-"), dir
	c, err := StartProbed(context.Background(), opts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.FailureLogs(t)
		}
		if err := c.Stop(); err != nil {
			t.Logf("stopping control plane: %v", err)
		}
	})
	return c
}

// Kubectl runs the kubectl on PATH against the cluster with stdin as its
// standard input (may be nil) and returns its combined output. The error
// includes that output.
func (c *Cluster) Kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	// KUBECONFIG rather than --kubeconfig: kubectl refuses global flags
	// before a plugin's name (kubectl karpx …).
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// InstallCRDs applies every CRD in dir (the repository's manifests/crds)
// and waits until they are established.
func (c *Cluster) InstallCRDs(ctx context.Context, dir string) error {
	if _, err := c.Kubectl(ctx, nil, "apply", "--server-side", "-f", dir); err != nil {
		return err
	}
	return c.WaitEstablished(ctx, "-f", dir)
}

// WaitEstablished waits up to 60 s until the CRDs that target names
// ("-f DIR", "crd --all", "crd NAME") are Established, with kubectl wait.
// kubectl wait gives up at once with ".status.conditions accessor error:
// <nil> is of the type <nil>" on a CRD so new that the API server has not
// written its status yet; that answer is retried until the 60 s are up.
// It returns kubectl's error and output otherwise.
func (c *Cluster) WaitEstablished(ctx context.Context, target ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, target...)
	for {
		out, err := c.Kubectl(ctx, nil, args...)
		if err == nil || !strings.Contains(out, ".status.conditions accessor error") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
