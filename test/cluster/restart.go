package cluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
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
// cluster`, keeps it down for down, starts it again with `kwokctl start
// cluster` (same ports, same etcd data) and waits until the API server
// answers. Clients see connection errors meanwhile, as in a control-plane
// upgrade or an API server crash.
func (c *Cluster) Restart(ctx context.Context, down time.Duration) error {
	if _, err := c.kwokctl(ctx, "stop", "cluster"); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	if _, err := c.kwokctl(ctx, "start", "cluster"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().ServerVersion()
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("API server not back after restart: %w", err)
	}
	return nil
}

// RestartAPIServer restarts kube-apiserver alone: it SIGKILLs the process
// kwokctl started (pids/kube-apiserver.pid in the cluster's directory),
// keeps it down for down, and starts it again with the same command line,
// working directory and environment, logging to the same file, then waits
// until it answers. etcd, the scheduler, the controller manager and kwok
// keep running and see the API server gone, as in an API server crash.
// Unlike Restart, no port is left free while the API server is down (the
// test holds it), only during the new process's start-up; the new
// process's id replaces the old in the pid file, so that Stop still stops
// it.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	dir := filepath.Join(c.workdir, "clusters", c.Name)
	pidFile := filepath.Join(dir, "pids", "kube-apiserver.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile, err)
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return fmt.Errorf("kube-apiserver (pid %d) not running: %w", pid, err)
	}
	environ, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return err
	}
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil {
		return err
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	// Not our child: wait until /proc no longer shows it running.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		st, err := os.ReadFile(proc + "/stat")
		return err != nil || strings.Contains(string(st), ") Z "), nil
	}); err != nil {
		return fmt.Errorf("kube-apiserver (pid %d) did not exit: %w", pid, err)
	}
	// Hold the API server's port while it is down, answering every
	// connection by closing it (clients see a reset, as from a crashed
	// server), so that a cluster starting meanwhile cannot take it; only
	// the new process's start-up is left as a window.
	u, err := url.Parse(c.RESTConfig.Host)
	if err != nil {
		return err
	}
	// The killed process's threads may still hold the socket for a
	// moment after its leader shows as a zombie: retry for up to 10 s.
	var ln net.Listener
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ln, err = net.Listen("tcp", ":"+u.Port())
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("holding the API server's port %s while it is down: %w", u.Port(), err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	select {
	case <-ctx.Done():
		ln.Close()
		return ctx.Err()
	case <-time.After(down):
	}
	ln.Close()
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", "kube-apiserver.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = cwd
	cmd.Env = strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, as kwokctl starts it: a signal to the test's
	// group does not reach it; Stop (kwokctl) kills it by its pid file.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it when it exits
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().ServerVersion()
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("kube-apiserver not back after restart: %w", err)
	}
	return nil
}

// Running reports whether the control-plane component (kube-apiserver,
// kube-scheduler, kube-controller-manager, etcd, kwok-controller) that
// kwokctl started is still running: its pid file (pids/<component>.pid in
// the cluster's directory) names a live process that is not a zombie. It
// returns an error when the pid file cannot be read.
func (c *Cluster) Running(component string) (bool, error) {
	pidFile := filepath.Join(c.workdir, "clusters", c.Name, "pids", component+".pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return false, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return false, fmt.Errorf("%s: %w", pidFile, err)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, nil
	}
	return !strings.Contains(string(st), ") Z "), nil
}
