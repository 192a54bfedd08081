// Command demo runs karpx's demo: `go run ./hack/demo up` starts a local
// control plane (test/cluster), the EC2 simulator and the karpx controller
// as background processes, applies Karpenter's general-purpose example and a
// Deployment of pending pods, waits until karpx has launched nodes for them
// and every pod is Running, prints `kubectl karpx status`, then scales the
// Deployment to zero and shows the nodes going away (and scales it back).
// `go run ./hack/demo check` checks a running demo as its user would: its
// pods Running and every command it printed at its end working as printed
// (.ci/run runs it after `make demo`). `go run ./hack/demo down` stops
// everything. The Makefile's `demo`, `demo-check` and `demo-down` targets
// call it with bin/ first on PATH.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/karpx/karpx/test/cluster"
)

const (
	clusterName = "karpx-demo"
	replicas    = 10
)

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "up" && os.Args[1] != "down" && os.Args[1] != "check") {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/demo up|down|check")
		os.Exit(2)
	}
	bin, err := cluster.BinDir()
	if err != nil {
		fail(err)
	}
	root := filepath.Dir(bin)
	work := filepath.Join(root, ".demo")
	if os.Args[1] == "check" {
		if err := check(work); err != nil {
			fail(err)
		}
		return
	}
	if os.Args[1] == "down" {
		if err := down(work); err != nil {
			fail(err)
		}
		fmt.Println("demo stopped")
		return
	}
	if err := up(root, bin, work); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	os.Exit(1)
}

// up runs the demo. Longer than 80 lines on purpose: it is the demo's
// script, one step() per stage the user sees printed (control plane,
// simulator, controller, NodePool, scale up, scale down), read top to
// bottom as it runs.
func up(root, bin, work string) error {
	if _, err := os.Stat(work); err == nil {
		fmt.Println("a previous demo is running; stopping it first")
		if err := down(work); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	step("starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)")
	c, err := cluster.Start(ctx, cluster.Options{Name: clusterName, Workdir: filepath.Join(work, "cluster"), BinDir: bin})
	if err != nil {
		return err
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "manifests", "crds")); err != nil {
		return err
	}

	simPort, err := freePort()
	if err != nil {
		return err
	}
	endpoint := "http://127.0.0.1:" + strconv.Itoa(simPort)
	step("starting the EC2 simulator on " + endpoint)
	if err := background(work, "ec2sim", filepath.Join(bin, "ec2sim"),
		"--listen", "127.0.0.1:"+strconv.Itoa(simPort), "--cluster-name", clusterName, "--kubeconfig", c.Kubeconfig); err != nil {
		return err
	}
	if err := waitHTTP(ctx, endpoint+"/_sim/counts"); err != nil {
		return fmt.Errorf("EC2 simulator did not come up (see %s): %w", filepath.Join(work, "ec2sim.log"), err)
	}

	probePort, err := freePort()
	if err != nil {
		return err
	}
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	statusPort, err := freePort()
	if err != nil {
		return err
	}
	// kubectl karpx reads the controller's status endpoints (/throttle,
	// /hydration, /capacity) on their own plain-HTTP port; /metrics stays
	// HTTPS behind the TokenReview filter (the default), which the demo's
	// commands do not need.
	status := "http://127.0.0.1:" + strconv.Itoa(statusPort)
	step("starting karpx-controller as ServiceAccount karpx/karpx (RBAC from manifests/controller)")
	if err := cluster.ApplyRBAC(ctx, c.RESTConfig, filepath.Join(root, "manifests", "controller")); err != nil {
		return err
	}
	// A day: the demo is for an afternoon; the API server caps nothing here.
	saConfig, err := cluster.ServiceAccountConfig(ctx, c.RESTConfig, "karpx", "karpx", 24*time.Hour)
	if err != nil {
		return err
	}
	controllerKubeconfig := filepath.Join(work, "karpx-controller.kubeconfig")
	if err := cluster.WriteKubeconfig(saConfig, controllerKubeconfig); err != nil {
		return err
	}
	if err := background(work, "karpx-controller", filepath.Join(bin, "karpx-controller"),
		"--kubeconfig", controllerKubeconfig, "--cluster-name", clusterName, "--cluster-endpoint", c.RESTConfig.Host,
		"--ec2-endpoint", endpoint, "--leader-elect=false", "--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(metricsPort),
		"--status-bind-address", "127.0.0.1:"+strconv.Itoa(statusPort),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(probePort)); err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://127.0.0.1:"+strconv.Itoa(probePort)+"/readyz"); err != nil {
		return fmt.Errorf("karpx-controller not ready (see %s): %w", filepath.Join(work, "karpx-controller.log"), err)
	}

	step("applying Karpenter's general-purpose example (NodePool + EC2NodeClass) unchanged but for the cluster name")
	example, err := os.ReadFile(filepath.Join(root, "test", "testdata", "karpenter-examples", "general-purpose.yaml"))
	if err != nil {
		return err
	}
	if _, err := kubectl(ctx, c, []byte(strings.ReplaceAll(string(example), "${CLUSTER_NAME}", clusterName)), "apply", "-f", "-"); err != nil {
		return err
	}
	step(fmt.Sprintf("creating Deployment inflate: %d pods of 500m CPU / 512Mi", replicas))
	if _, err := kubectl(ctx, c, []byte(inflate), "apply", "-f", "-"); err != nil {
		return err
	}

	step("waiting for karpx to launch nodes and for every pod to be Running")
	start := time.Now()
	for {
		out, err := kubectl(ctx, c, nil, "get", "pods", "-l", "app=inflate", "-o", "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}")
		if err != nil {
			return err
		}
		running := strings.Count(out, "Running")
		fmt.Printf("  %3.0fs  %d/%d pods Running\n", time.Since(start).Seconds(), running, replicas)
		if running == replicas {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods not Running in time; see %s", filepath.Join(work, "karpx-controller.log"))
		case <-time.After(3 * time.Second):
		}
	}

	for _, args := range [][]string{
		{"karpx", "status", "--budget-endpoint", status},
		// In a real cluster `kubectl karpx throttle` and `capacity` read the
		// controller's status port through the API server's service proxy;
		// the demo's controller runs outside the cluster, so they read its
		// status address directly.
		{"karpx", "throttle", "--endpoint", status},
		{"karpx", "capacity", "--endpoint", status},
		{"get", "nodes", "-o", "custom-columns=NODE:.metadata.name,PROVIDER-ID:.spec.providerID,TYPE:.metadata.labels.node\\.kubernetes\\.io/instance-type,READY:.status.conditions[?(@.type==\"Ready\")].status"},
		{"get", "pods", "-l", "app=inflate", "-o", "wide"},
	} {
		fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
		out, err := kubectl(ctx, c, nil, args...)
		fmt.Print(out)
		if err != nil {
			return err
		}
	}
	step("scaling inflate to 0: karpx drains and terminates the empty nodes (consolidateAfter 0s)")
	if _, err := kubectl(ctx, c, nil, "scale", "deployment", "inflate", "--replicas", "0"); err != nil {
		return err
	}
	start = time.Now()
	for {
		out, err := kubectl(ctx, c, nil, "get", "nodeclaims", "-o", "name")
		if err != nil {
			return err
		}
		left := strings.Count(out, "nodeclaim")
		fmt.Printf("  %3.0fs  %d NodeClaim(s) left\n", time.Since(start).Seconds(), left)
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes not removed in time; see %s", filepath.Join(work, "karpx-controller.log"))
		case <-time.After(3 * time.Second):
		}
	}
	for _, args := range [][]string{
		{"karpx", "status", "--budget-endpoint", status},
		{"get", "nodes"},
	} {
		fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
		out, _ := kubectl(ctx, c, nil, args...)
		fmt.Print(out)
	}
	if _, err := kubectl(ctx, c, nil, "scale", "deployment", "inflate", "--replicas", fmt.Sprint(replicas)); err != nil {
		return err
	}
	h := hints(c.Kubeconfig, bin, status)
	if err := os.WriteFile(filepath.Join(work, hintsFile), []byte(h), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nThe demo keeps running (inflate scaled back to %d). Poke around with:\n%sLogs: %s/*.log\nStop it with: make demo-down\n", replicas, h, work)
	return nil
}

// hintsFile, in the demo's working directory, holds the commands the demo
// prints at its end (hints), which `go run ./hack/demo check` runs.
const hintsFile = "hints.sh"

// hints returns the commands the demo suggests at its end, one a line,
// indented, shell comments after "#": the exports that reach the cluster
// and bin/, then kubectl commands reading the controller's status
// address status (its --status-bind-address URL). `check` runs them
// exactly as printed.
func hints(kubeconfig, bin, status string) string {
	return fmt.Sprintf(`  export KUBECONFIG=%[1]s PATH=%[2]s:$PATH
  kubectl karpx status --budget-endpoint %[3]s   # the controller runs beside the cluster, not in it
  kubectl karpx throttle --endpoint %[3]s
  kubectl karpx capacity --endpoint %[3]s
  kubectl karpx nodeclaims
  kubectl scale deployment inflate --replicas 40
  kubectl scale deployment inflate --replicas 0   # and watch the nodes go
`, kubeconfig, bin, status)
}

// check verifies a running demo the way its user would: every pod of
// inflate is Running (waiting up to 2 minutes, since the demo ends by
// scaling it back up), then each hint runs as printed, in order, in one
// bash with the hint's exports; a hint fails when it exits non-zero or when
// a karpx command says a part of its answer is unavailable (as `capacity`
// without --endpoint did on the demo, whose controller runs outside the
// cluster). It returns the first failure.
func check(work string) error {
	data, err := os.ReadFile(filepath.Join(work, hintsFile))
	if err != nil {
		return fmt.Errorf("no running demo to check (run make demo first): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var exports string
	var commands []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "export "):
			exports += line + "\n"
		default:
			commands = append(commands, line)
		}
	}
	if exports == "" || len(commands) == 0 {
		return fmt.Errorf("%s holds no export or no command:\n%s", filepath.Join(work, hintsFile), data)
	}
	sh := func(command string) (string, error) {
		out, err := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+exports+command).CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	for {
		out, err := sh(`kubectl get pods -l app=inflate -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}'`)
		if err != nil {
			return fmt.Errorf("listing inflate's pods: %w\n%s", err, out)
		}
		running := strings.Count(out, "Running")
		if running == replicas {
			fmt.Printf("check: %d/%d inflate pods Running after %.0fs\n", running, replicas, time.Since(start).Seconds())
			break
		}
		if ctx.Err() != nil || time.Since(start) > 2*time.Minute {
			return fmt.Errorf("%d/%d inflate pods Running after %.0fs; see %s", running, replicas,
				time.Since(start).Seconds(), filepath.Join(work, "karpx-controller.log"))
		}
		time.Sleep(2 * time.Second)
	}
	for _, command := range commands {
		fmt.Printf("\n$ %s\n", command)
		out, err := sh(command)
		fmt.Print(out)
		if err != nil {
			return fmt.Errorf("hint %q failed: %w", command, err)
		}
		if strings.HasPrefix(command, "kubectl karpx ") && strings.Contains(out, "unavailable") {
			return fmt.Errorf("hint %q answered, but says part of its answer is unavailable", command)
		}
	}
	fmt.Printf("\ncheck: the demo's %d hints work as printed\n", len(commands))
	return nil
}

const inflate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
  namespace: default
spec:
  replicas: 10
  selector:
    matchLabels: {app: inflate}
  template:
    metadata:
      labels: {app: inflate}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: inflate
          image: registry.k8s.io/pause:3.10
          resources:
            requests: {cpu: 500m, memory: 512Mi}
`

func step(s string) { fmt.Printf("==> %s\n", s) }

func kubectl(ctx context.Context, c *cluster.Cluster, stdin []byte, args ...string) (string, error) {
	return c.Kubectl(ctx, stdin, args...)
}

// background starts a process that outlives this command, logging to
// work/NAME.log and recording its pid in work/NAME.pid.
func background(work, name, path string, args ...string) error {
	logFile, err := os.Create(filepath.Join(work, name+".log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIAEXAMPLEKARPXDEMO0", "AWS_SECRET_ACCESS_KEY=karpx-demo", "AWS_REGION=us-east-1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	return os.WriteFile(filepath.Join(work, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

func down(work string) error {
	var errs []error
	for _, name := range []string{"karpx-controller", "ec2sim"} {
		data, err := os.ReadFile(filepath.Join(work, name+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "cluster")); err == nil {
		bin, _ := cluster.BinDir()
		cmd := exec.Command(filepath.Join(bin, "kwokctl"), "delete", "cluster", "--name", clusterName)
		cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Join(work, "cluster"))
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kwokctl delete cluster: %w\n%s", err, out))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.RemoveAll(work))
	}
	return errors.Join(errs...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitHTTP(ctx context.Context, url string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
