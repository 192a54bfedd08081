package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Restart stops every component of the control plane (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler, kwok) with `kwokctl stop
// cluster`, keeps it down for down while holding its ports (holdPorts),
// starts it again with `kwokctl start cluster` (same ports, same etcd data)
// and waits until the API server answers. Clients see connection resets
// meanwhile, as in a control-plane upgrade or an API server crash.
func (c *Cluster) Restart(ctx context.Context, down time.Duration) error {
	if _, err := c.kwokctl(ctx, "stop", "cluster"); err != nil {
		return err
	}
	if err := holdPorts(ctx, down, c.ports.list()...); err != nil {
		return err
	}
	if _, err := c.kwokctl(ctx, "start", "cluster"); err != nil {
		return err
	}
	if err := c.awaitAPIServer(ctx, 500*time.Millisecond); err != nil {
		return fmt.Errorf("API server not back after restart: %w", err)
	}
	return nil
}

// awaitAPIServer polls the API server's version every interval until it
// answers, for at most 2 minutes; it returns the client's or the poll's
// error.
func (c *Cluster) awaitAPIServer(ctx context.Context, interval time.Duration) error {
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, interval, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().ServerVersion()
		return err == nil, nil
	})
}

// RestartAPIServer restarts kube-apiserver alone: it SIGKILLs the process
// kwokctl started (pids/kube-apiserver.pid in the cluster's directory),
// keeps it down for down, and starts it again with the same command line,
// working directory and environment, logging to the same file, then waits
// until it answers. etcd, the scheduler, the controller manager and kwok
// keep running and see the API server gone, as in an API server crash.
// As in Restart, its port is held while it is down (holdPorts); the new
// process's id replaces the old in the pid file, so that Stop still stops
// it.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	pid, err := c.pid("kube-apiserver")
	if err != nil {
		return err
	}
	proc, err := readProcess(pid)
	if err != nil {
		return fmt.Errorf("kube-apiserver (pid %d) not running: %w", pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	// Not our child: wait until /proc no longer shows it running.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !alive(pid), nil
	}); err != nil {
		return fmt.Errorf("kube-apiserver (pid %d) did not exit: %w", pid, err)
	}
	if err := holdPorts(ctx, down, c.ports.APIServer); err != nil {
		return err
	}
	newPid, err := c.startProcess("kube-apiserver", proc)
	if err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	if err := os.WriteFile(c.pidFile("kube-apiserver"), []byte(strconv.Itoa(newPid)), 0o644); err != nil {
		return err
	}
	if err := c.awaitAPIServer(ctx, 250*time.Millisecond); err != nil {
		return fmt.Errorf("kube-apiserver not back after restart: %w", err)
	}
	return nil
}

// process is what it takes to start a process again as it was started:
// its command line, environment and working directory.
type process struct {
	args, env []string
	dir       string
}

// readProcess reads pid's command line, environment and working directory
// from /proc; it returns an error when pid is not running.
func readProcess(pid int) (process, error) {
	dir := fmt.Sprintf("/proc/%d", pid)
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return process{}, err
	}
	environ, err := os.ReadFile(dir + "/environ")
	if err != nil {
		return process{}, err
	}
	cwd, err := os.Readlink(dir + "/cwd")
	if err != nil {
		return process{}, err
	}
	split := func(b []byte) []string { return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") }
	return process{args: split(cmdline), env: split(environ), dir: cwd}, nil
}

// startProcess starts p again as component, logging to the component's
// log file (logs/<component>.log, appended), in its own process group as
// kwokctl starts it (a signal to the test's group does not reach it; Stop,
// through kwokctl, kills it by its pid file), and reaps it when it exits.
// It returns the new process's id.
func (c *Cluster) startProcess(component string, p process) (int, error) {
	logFile, err := os.OpenFile(filepath.Join(c.workdir, "clusters", c.Name, "logs", component+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// pidFile is the path of the pid file kwokctl writes for component.
func (c *Cluster) pidFile(component string) string {
	return filepath.Join(c.workdir, "clusters", c.Name, "pids", component+".pid")
}

// pid reads component's process id from its pid file; it returns the read
// or parse error.
func (c *Cluster) pid(component string) (int, error) {
	path := c.pidFile(component)
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return pid, nil
}

// alive reports whether pid is a running process, not a zombie.
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(st), ") Z ")
}

// Running reports whether the control-plane component (kube-apiserver,
// kube-scheduler, kube-controller-manager, etcd, kwok-controller) that
// kwokctl started is still running: its pid file (pids/<component>.pid in
// the cluster's directory) names a live process that is not a zombie. It
// returns an error when the pid file cannot be read.
func (c *Cluster) Running(component string) (bool, error) {
	pid, err := c.pid(component)
	if err != nil {
		return false, err
	}
	return alive(pid), nil
}
