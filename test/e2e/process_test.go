package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpx/karpx/test/cluster"
)

// This file runs bin/karpx-controller as its own process, as a Deployment's
// container does, so that a test can SIGKILL it at an exact point: the
// process gets no chance to finish a reconcile, release its Lease or
// write anything. It runs as ServiceAccount karpx/karpx with the RBAC of
// manifests/controller (a kubeconfig with that ServiceAccount's token, not
// the admin's), and its log is checked for Forbidden errors as the
// in-process autoscaler's is.

// leaderLease is the controller's leader-election Lease (namespace karpx,
// which manifests/controller grants; name from operator.New).
var leaderLease = types.NamespacedName{Namespace: "karpx", Name: "karpx-leader-election"}

// Leader-election timing: controller-runtime's defaults, which the
// operator keeps (LeaseDuration 15 s, RetryPeriod 2 s), and client-go's
// leaderelection.JitterFactor (1.2). A standby counts a Lease as expired
// leaseDuration after it last saw the record change, and looks every
// retryPeriod to retryPeriod×(1+JitterFactor): it takes the Lease of a
// dead leader at most leaseDuration plus two of its longest looks after
// the death (one to see the last renewal, one after the expiry).
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
	maxTakeover   = leaseDuration + 2*(retryPeriod*22/10)
)

// process is one karpx binary run by startProcess.
type process struct {
	// name tells processes apart in logs; a controller's EC2 calls carry it
	// as the User-Agent's app id (AWS_SDK_UA_APP_ID), e.g. "app/chaos-a".
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	lines   sync.WaitGroup
}

// controllerKubeconfig returns the path of a kubeconfig for ServiceAccount
// karpx/karpx, written once per environment.
func (e *env) controllerKubeconfig() string {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "karpx-controller.kubeconfig")
	sa := cluster.ServiceAccountForTest(e.t, e.cluster.RESTConfig, filepath.Join(e.root, "manifests", "controller"), "karpx", "karpx")
	if err := cluster.WriteKubeconfig(sa, path); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// startController starts bin/karpx-controller (built by `make build`)
// named name against the simulator with the flags of runAutoscaler's test
// defaults, then args (later flags win). kubeconfig comes from
// controllerKubeconfig. The process is killed when the test ends.
func (e *env) startController(kubeconfig, name string, args ...string) *process {
	e.t.Helper()
	return e.startControllerBinary("karpx-controller", kubeconfig, name, args...)
}

// startControllerBinary is startController running binary (a name in bin/
// or an absolute path, e.g. an older release's build).
func (e *env) startControllerBinary(binary, kubeconfig, name string, args ...string) *process {
	e.t.Helper()
	return e.startProcess(binary, name, append([]string{
		"--kubeconfig=" + kubeconfig,
		"--cluster-name=" + e.name,
		"--cluster-endpoint=" + e.cluster.RESTConfig.Host,
		"--region=us-east-1",
		"--ec2-endpoint=" + e.endpoint,
		"--registration-ttl=2m",
		"--batch-max-duration=5s",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--leader-elect=false",
		"--leader-election-namespace=" + leaderLease.Namespace,
	}, args...), []string{
		"AWS_ACCESS_KEY_ID=AKIAEXAMPLEKARPXSIM00",
		"AWS_SECRET_ACCESS_KEY=karpx-simulator-secret",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_SDK_UA_APP_ID=" + name,
		// The status endpoints off unless args name an address (their
		// default :8082 would clash between tests); through the
		// environment, which an older release's binary (helm upgrade
		// tests) ignores, where it would refuse an unknown flag.
		"STATUS_BIND_ADDRESS=0",
	})
}

// startProcess starts bin/binary (built by `make build`; binary may also
// be an absolute path; $KARPX_PREBUILT_BIN/binary instead when that
// variable names a directory holding it, as pluginDir reads it) with args
// and the
// test's environment plus env. Its output goes to a log file, shown when
// the test fails; a Forbidden error in it (a permission manifests/ lacks)
// fails the test unless forbiddenExcused. The process is killed when the
// test ends.
func (e *env) startProcess(binary, name string, args, env []string) *process {
	e.t.Helper()
	t := e.t
	bin := binary
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(e.root, "bin", binary)
		if dir := os.Getenv("KARPX_PREBUILT_BIN"); dir != "" {
			if _, err := os.Stat(filepath.Join(dir, binary)); err == nil {
				bin = filepath.Join(dir, binary)
			}
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run make build (%v)", bin, err)
	}
	binary = filepath.Base(binary)
	p := &process{name: name, exited: make(chan struct{}), logPath: filepath.Join(t.TempDir(), name+".log")}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var forbidden []string
	var mu sync.Mutex
	p.lines.Add(1)
	go func() {
		defer p.lines.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if strings.Contains(line, " is forbidden: ") && !e.forbiddenExcused.Load() {
				mu.Lock()
				forbidden = append(forbidden, line)
				mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		_ = p.cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		p.lines.Wait()
		logFile.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, line := range forbidden {
			t.Errorf("RBAC: %s %s: %s (add the permission to manifests/)", binary, name, line)
		}
		if t.Failed() {
			if out, err := os.ReadFile(p.logPath); err == nil {
				cluster.FailureLog(t, binary+" "+name, out)
			}
		}
	})
	return p
}

// signal sends sig to the process and waits until it has exited.
func (p *process) signal(sig syscall.Signal) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.exited
}

// kill SIGKILLs the process and waits until it is gone.
func (p *process) kill() { p.signal(syscall.SIGKILL) }

// lease returns the leader-election Lease's holder identity and last
// renewal time ("" and zero when there is none).
func (e *env) lease(ctx context.Context) (holder string, renewed time.Time) {
	var lease coordinationv1.Lease
	if err := e.kube.Get(ctx, leaderLease, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		return "", time.Time{}
	}
	if lease.Spec.RenewTime != nil {
		renewed = lease.Spec.RenewTime.Time
	}
	return *lease.Spec.HolderIdentity, renewed
}
