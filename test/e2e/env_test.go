package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
	"github.com/karpx/karpx/test/problems"
)

// env is one end-to-end environment: control plane, simulator, autoscaler.
type env struct {
	t        *testing.T
	ctx      context.Context
	cancel   context.CancelFunc
	cluster  *cluster.Cluster
	kube     client.Client
	sim      *ec2sim.Simulator
	endpoint string
	root     string
	name     string
	// log is the test's logger (the simulator's and autoscalers' parent).
	log logr.Logger
	// forbiddenExcused, while true, keeps a Forbidden error the autoscaler
	// logs from failing the test (a restarted kube-apiserver refuses
	// requests until its RBAC informers sync).
	forbiddenExcused atomic.Bool
}

// newEnv starts the control plane, installs the CRDs, starts the simulator
// and the autoscaler with the default options. Everything stops when the
// test ends.
func newEnv(t *testing.T, clusterName string) *env {
	return newEnvWithLog(t, clusterName, nil, nil)
}

// newEnvWithLog is newEnv with the autoscaler's default options changed by
// tweak and its logger wrapped by wrapLog (either may be nil).
func newEnvWithLog(t *testing.T, clusterName string, tweak func(*operator.Options), wrapLog func(logr.Logger) logr.Logger) *env {
	t.Helper()
	return newEnvWith(t, clusterName, envOptions{tweak: tweak, wrapLog: wrapLog})
}

// newEnvWithoutAutoscaler is newEnv without the autoscaler: the test starts
// (and stops, restarts) its own with startAutoscaler.
func newEnvWithoutAutoscaler(t *testing.T, clusterName string) *env {
	t.Helper()
	return newEnvWith(t, clusterName, envOptions{noAutoscaler: true})
}

// envOptions change newEnvWith's defaults; every field may be zero.
type envOptions struct {
	// tweak changes the autoscaler's options.
	tweak func(*operator.Options)
	// wrapLog wraps the autoscaler's logger.
	wrapLog func(logr.Logger) logr.Logger
	// sim changes the simulator's configuration before it starts.
	sim func(*ec2sim.Config)
	// logs, when set, records every line the autoscaler and the simulator
	// log.
	logs *logRecorder
	// noAutoscaler leaves the autoscaler to the test (startAutoscaler).
	noAutoscaler bool
	// audit turns on kube-apiserver's audit log for the autoscaler's
	// ServiceAccount (checkControllerRBAC reads it). The test gets its own
	// control plane (the audit log must hold its requests only).
	audit bool
	// ownControlPlane starts a control plane for this test alone instead
	// of sharing the package's (see sharedControlPlane): for tests that
	// restart, stop or break the control plane, or fill it with more
	// objects than a reset should delete.
	ownControlPlane bool
	// auditUsers turns on the audit log for these users' requests too
	// (e.g. the ServiceAccounts a Helm chart creates); implies a control
	// plane of the test's own.
	auditUsers []string
	// crds, when set, installs the CRDs instead of manifests/crds (e.g.
	// `helm install` of charts/karpx-crd) before the simulator starts;
	// implies a control plane of the test's own.
	crds func(ctx context.Context, c *cluster.Cluster) error
}

// newEnvWith is newEnv with the changes of o.
func newEnvWith(t *testing.T, clusterName string, o envOptions) *env {
	t.Helper()
	tweak, wrapLog := o.tweak, o.wrapLog
	bin := cluster.SkipWithoutControlPlane(t)
	root := filepath.Dir(bin)
	var c *cluster.Cluster
	if o.audit || o.ownControlPlane || len(o.auditUsers) > 0 || o.crds != nil || needsOwnControlPlane(t) {
		auditUsers := o.auditUsers
		if o.audit {
			auditUsers = append(auditUsers, controllerUser)
		}
		c = cluster.StartForTestAudited(t, auditUsers...)
		install := o.crds
		if install == nil {
			install = func(ctx context.Context, c *cluster.Cluster) error {
				return c.InstallCRDs(ctx, filepath.Join(root, "manifests", "crds"))
			}
		}
		if err := install(context.Background(), c); err != nil {
			t.Fatalf("installing CRDs: %v", err)
		}
	} else {
		c = sharedControlPlane(t, root)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	kube, err := client.New(c.RESTConfig, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	simLog := log.WithName("ec2sim")
	if o.logs != nil {
		simLog = o.logs.wrap(log).WithName("ec2sim")
	}
	simCfg := ec2sim.Config{ClusterName: clusterName, Kube: kube, Logger: simLog}
	if o.sim != nil {
		o.sim(&simCfg)
	}
	sim, err := ec2sim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The simulator logs its shutdown through t: the test must not end
	// before (a log after the end panics the test binary). Runs after the
	// autoscaler's cleanup, registered later.
	t.Cleanup(func() {
		cancel()
		<-sim.Stopped()
	})
	e := &env{t: t, ctx: ctx, cancel: cancel, cluster: c, kube: kube, sim: sim, endpoint: endpoint, root: root, name: clusterName, log: log}
	if o.noAutoscaler {
		return e
	}
	karpxLog := log.WithName("karpx")
	if o.logs != nil {
		karpxLog = o.logs.wrap(log).WithName("karpx")
	}
	if wrapLog != nil {
		karpxLog = wrapLog(karpxLog)
	}
	e.startAutoscaler(karpxLog, tweak)
	return e
}

// startAutoscaler starts the autoscaler against the simulator with the
// test defaults changed by tweak (may be nil) and logging to log. It
// returns a function that stops this autoscaler and waits until it has
// stopped (a clean stop is checked); the test's cleanup calls it too.
func (e *env) startAutoscaler(log logr.Logger, tweak func(*operator.Options)) (stop func()) {
	e.t.Helper()
	_, stop = e.runAutoscaler(e.ctx, log, tweak)
	return stop
}

// runAutoscaler is startAutoscaler bound to ctx, which may end before the
// test; it returns the operator and a function that stops it and waits
// until it has stopped (also called when the test ends).
func (e *env) runAutoscaler(parent context.Context, log logr.Logger, tweak func(*operator.Options)) (op *operator.Operator, stop func()) {
	e.t.Helper()
	t := e.t
	opts := operator.DefaultOptions()
	opts.ClusterName = e.name
	opts.ClusterEndpoint = e.cluster.RESTConfig.Host
	opts.Region = "us-east-1"
	opts.EC2Endpoint = e.endpoint
	opts.RegistrationTTL = 2 * time.Minute
	opts.BatchMaxDuration = 5 * time.Second
	opts.MetricsBindAddress = "0"
	opts.StatusBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	opts.LeaderElection = false
	opts.SkipControllerNameValidation = true
	if tweak != nil {
		tweak(&opts)
	}
	// The autoscaler runs as ServiceAccount karpx/karpx with the RBAC of
	// manifests/controller, as in a cluster: a Forbidden error it logs
	// fails the test.
	ctx, cancel := context.WithCancel(logr.NewContext(parent, cluster.FailOnForbiddenUnless(t, log, e.forbiddenExcused.Load)))
	saConfig := cluster.ServiceAccountForTest(t, e.cluster.RESTConfig, filepath.Join(e.root, "manifests", "controller"), "karpx", "karpx")
	op, err := operator.NewAWS(ctx, saConfig, opts)
	if err != nil {
		cancel()
		t.Fatalf("building the autoscaler: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			// Every run checks the shutdown too: all controllers' workers
			// must finish within the manager's grace period, even after
			// the P1 control storm with hundreds of reconciles in flight
			// (it once overran it: see UsePriorityQueue in package
			// operator).
			if err := <-done; err != nil {
				t.Errorf("autoscaler did not stop cleanly: %v", err)
			}
		})
	}
	// Cleanups run last-in first-out: the autoscaler stops before the
	// control plane goes away.
	t.Cleanup(stop)
	return op, stop
}

// newBareEnv is newEnv without the autoscaler (newEnvWithoutAutoscaler).
func newBareEnv(t *testing.T, clusterName string) *env {
	t.Helper()
	return newEnvWithoutAutoscaler(t, clusterName)
}

// applyExample applies a shared Karpenter example unchanged but for
// ${CLUSTER_NAME}.
func (e *env) applyExample(name string) {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.root, "test", "testdata", "karpenter-examples", name))
	if err != nil {
		e.t.Fatal(err)
	}
	manifest := strings.ReplaceAll(string(data), "${CLUSTER_NAME}", e.name)
	if out, err := e.cluster.Kubectl(e.ctx, []byte(manifest), "apply", "-f", "-"); err != nil {
		e.t.Fatalf("applying %s: %v", name, err)
	} else {
		e.t.Logf("applied %s:\n%s", name, out)
	}
}

// deployment returns a Deployment of replicas pause pods requesting cpu and memory.
func deployment(name string, replicas int32, cpu, memory string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name:  "pause",
						Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse(cpu),
							corev1.ResourceMemory: resource.MustParse(memory),
						}},
					}},
				},
			},
		},
	}
}

// eventually polls cond every 500ms until it returns true or timeout passes.
func (e *env) eventually(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, timeout, true, cond); err != nil {
		e.t.Fatalf("%s: not true within %s: %v", what, timeout, err)
	}
}

// buildPlugin returns a PATH with a kubectl-karpx of this source tree
// first, so the real kubectl finds the plugin: $KARPX_PREBUILT_BIN (set by
// `make test` to bin/, which `make build` has just filled) when it holds
// one, else one built once per test process into a temporary directory.
func buildPlugin(t *testing.T, root string) string {
	t.Helper()
	dir, err := pluginDir(root)
	if err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// plugin holds the directory buildPlugin built kubectl-karpx into; the
// build runs once per test process (the directory outlives every test).
var plugin struct {
	sync.Mutex
	dir string
}

// pluginDir returns a directory holding kubectl-karpx: $KARPX_PREBUILT_BIN
// when it has one, else one built from root once per process.
func pluginDir(root string) (string, error) {
	if dir := os.Getenv("KARPX_PREBUILT_BIN"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "kubectl-karpx")); err == nil {
			return dir, nil
		}
	}
	plugin.Lock()
	defer plugin.Unlock()
	if plugin.dir != "" {
		return plugin.dir, nil
	}
	dir, err := os.MkdirTemp("", "karpx-e2e-plugin-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-karpx"), "./cmd/kubectl-karpx")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building kubectl-karpx: %v\n%s", err, out)
	}
	plugin.dir = dir
	return dir, nil
}

// scenarioLogf logs one "scenario …:" line of figures and, when
// KARPX_SCENARIO_LOG names a file, appends it there too (problems.Logf,
// shared with the scenarios run on the real Karpenter in test/upstream),
// so that `make test` can print the figures of passing tests.
func scenarioLogf(t *testing.T, format string, args ...any) {
	t.Helper()
	problems.Logf(t, format, args...)
}
