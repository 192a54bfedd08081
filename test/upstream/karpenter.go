package upstream

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
)

// ModulePath is the Go module of upstream Karpenter, whose kwok provider
// (package main ModulePath+"/kwok") bin/karpenter-kwok is built from.
const ModulePath = "sigs.k8s.io/karpenter"

// BinaryName is the file name of Karpenter's kwok provider in the
// repository's bin/, written by `make karpenter-kwok`.
const BinaryName = "karpenter-kwok"

// CRDDirs are the directories, relative to the Karpenter module's root,
// whose CRDs a kwok-provider cluster installs: NodePool, NodeClaim and
// NodeOverlay from the kwok Helm chart (they differ from pkg/apis/crds only
// in restricting the karpenter.kwok.sh label domain, as the chart does) and
// the KWOKNodeClass.
var CRDDirs = []string{"kwok/charts/crds", "kwok/apis/crds"}

// Version is the version of ModulePath that karpx's go.mod requires, which
// `make karpenter-kwok` builds and whose CRDs InstallCRDs applies. A Go test
// binary carries no dependency versions to read it from, so it is written
// here; TestVersionIsGoMod fails when it and go.mod differ.
const Version = "v1.13.0"

// binaryVersion returns the version of module a binary was built from:
// its main module or one of its dependencies, never a replaced one.
func binaryVersion(bi *debug.BuildInfo, module string) (string, error) {
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m.Path == module {
			if m.Replace != nil {
				return "", fmt.Errorf("%s is replaced by %s %s: upstream mode needs the released module", module, m.Replace.Path, m.Replace.Version)
			}
			return m.Version, nil
		}
	}
	return "", fmt.Errorf("built from no version of %s", module)
}

// checkBuild returns an error unless path is a Go binary of package main
// pkg built from module at version; each error names the make target that
// fixes it.
func checkBuild(path, pkg, module, version, target string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s not found: run `make %s` (or `make test`, which builds it): %w", path, target, err)
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: reading its Go build information: %w", path, err)
	}
	if bi.Path != pkg {
		return fmt.Errorf("%s is %s, not %s: run `make %s`", path, bi.Path, pkg, target)
	}
	got, err := binaryVersion(bi, module)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if got != version {
		return fmt.Errorf("%s was built from %s %s but %s is pinned: run `make %s`", path, module, got, version, target)
	}
	return nil
}

// CheckBinary returns an error unless path is Karpenter's kwok provider
// built from ModulePath at Version (go.mod's): missing
// ("run make karpenter-kwok"), not the kwok provider, or built from another
// Karpenter version (a stale bin/ after go.mod moved; the fix is the same).
func CheckBinary(path string) error {
	return checkBuild(path, ModulePath+"/kwok", ModulePath, Version, "karpenter-kwok")
}

// ModuleDir returns the module cache directory of ModulePath at Version,
// downloading the module through the Go module proxy (`go mod download`,
// verified against the checksum database) when it is not cached. It
// returns the go command's error output on failure.
func ModuleDir(ctx context.Context) (string, error) {
	return moduleDir(ctx, ModulePath, Version)
}

// moduleDir returns the module cache directory of module at version (see
// ModuleDir).
func moduleDir(ctx context.Context, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	// Outside any module, so karpx's go.mod and go.sum are never touched.
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go mod download %s@%s: %w\n%s", module, version, err, ee.Stderr)
		}
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory in %q", module, version, out)
	}
	return info.Dir, nil
}

// InstallCRDs applies the CRDs of CRDDirs from the Karpenter module (see
// ModuleDir) to c and waits until they are established. It does not
// install karpx's EC2NodeClass (manifests/crds), which a cluster run by
// Karpenter's kwok provider does not have.
func InstallCRDs(ctx context.Context, c *cluster.Cluster) error {
	dir, err := ModuleDir(ctx)
	if err != nil {
		return err
	}
	for _, d := range CRDDirs {
		if err := c.InstallCRDs(ctx, filepath.Join(dir, d)); err != nil {
			return fmt.Errorf("installing Karpenter's CRDs from %s: %w", d, err)
		}
	}
	return nil
}

// Options configure Start. The zero value is usable.
type Options struct {
	// BinDir holds karpenter-kwok. Default: cluster.BinDir().
	BinDir string
	// Workdir receives the instance-types file and the log. Default: a new
	// temporary directory, removed by Stop.
	Workdir string
	// InstanceTypesFile is an instance-types file already written (see
	// WriteInstanceTypes). Default: Workdir/instance-types.json, written
	// from InstanceTypes(ec2sim.Config{}) — ec2sim's default zones and
	// prices.
	InstanceTypesFile string
	// Env are extra environment variables (KEY=value) for the process,
	// after and so overriding Start's own: e.g. BATCH_IDLE_DURATION=1s,
	// BATCH_MAX_DURATION=10s (Karpenter's defaults), LOG_LEVEL=debug,
	// FEATURE_GATES=….
	Env []string
	// Args are extra command-line flags.
	Args []string
	// ReadyTimeout bounds the wait for /readyz. Default 2 minutes.
	ReadyTimeout time.Duration
}

// StopTimeout is how long Stop waits after SIGTERM before SIGKILL. Karpenter
// shuts its manager down within seconds when nothing is in flight.
const StopTimeout = 30 * time.Second

// Karpenter is a running Karpenter process: the kwok provider (Start) or
// the AWS provider (StartAWS).
type Karpenter struct {
	// Name is the binary's file name, BinaryName or AWSBinaryName.
	Name string
	// LogPath is the file receiving the process's standard output and
	// error (Karpenter's JSON logs): Workdir/NAME-*.log, a new one for
	// every start.
	LogPath string
	// InstanceTypesFile is the file passed as --instance-types-file-path
	// (the kwok provider only).
	InstanceTypesFile string
	// MetricsURL is Karpenter's Prometheus endpoint,
	// http://127.0.0.1:PORT/metrics.
	MetricsURL string
	// ReadyURL is Karpenter's readiness endpoint,
	// http://127.0.0.1:PORT/readyz.
	ReadyURL string

	cmd       *exec.Cmd
	exited    chan struct{}
	waitErr   error
	stopOnce  sync.Once
	stopErr   error
	removeDir string
	logFile   *os.File
}

// startAttempts bounds the retries of a start whose port was taken between
// the free-port probe and Karpenter's bind.
const startAttempts = 3

// Start runs bin/karpenter-kwok against c and waits until it is ready
// (/readyz answers 200: caches synced and the NodePool and NodeClaim CRDs
// known, so InstallCRDs must have run). The process runs with c's admin
// kubeconfig (KUBECONFIG), SYSTEM_NAMESPACE=kube-system,
// DISABLE_LEADER_ELECTION=true, METRICS_PORT and HEALTH_PROBE_PORT on ports
// free on loopback (Karpenter binds them on every interface) and
// --instance-types-file-path. It returns an error when the binary is
// missing or stale (CheckBinary), the instance-types file cannot be
// written, or the process exits or is not ready within ReadyTimeout; the
// error carries the end of its log.
func Start(ctx context.Context, c *cluster.Cluster, opts Options) (*Karpenter, error) {
	if opts.BinDir == "" {
		dir, err := cluster.BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	bin := filepath.Join(opts.BinDir, BinaryName)
	if err := CheckBinary(bin); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	removeDir := ""
	if opts.Workdir == "" {
		dir, err := os.MkdirTemp("", "karpenter-kwok-")
		if err != nil {
			return nil, err
		}
		opts.Workdir, removeDir = dir, dir
	}
	if opts.InstanceTypesFile == "" {
		opts.InstanceTypesFile = filepath.Join(opts.Workdir, "instance-types.json")
		if err := WriteInstanceTypes(opts.InstanceTypesFile, ec2sim.Config{}); err != nil {
			if removeDir != "" {
				_ = os.RemoveAll(removeDir)
			}
			return nil, err
		}
	}
	p := process{name: BinaryName, bin: bin, kubeconfig: c.Kubeconfig, workdir: opts.Workdir, readyTimeout: opts.ReadyTimeout,
		args: append([]string{"--instance-types-file-path=" + opts.InstanceTypesFile}, opts.Args...), env: opts.Env}
	k, err := p.start(ctx)
	if err != nil {
		if removeDir != "" {
			_ = os.RemoveAll(removeDir)
		}
		return nil, err
	}
	k.InstanceTypesFile, k.removeDir = opts.InstanceTypesFile, removeDir
	return k, nil
}

// process is a Karpenter binary to run: bin with args, env after the
// variables every start sets, kubeconfig as KUBECONFIG, its log in workdir.
type process struct {
	name, bin    string
	kubeconfig   string
	workdir      string
	args, env    []string
	readyTimeout time.Duration
}

// start runs p until /readyz answers 200, retrying (startAttempts in all)
// a start whose port was taken between the free-port probe and
// Karpenter's bind.
func (p process) start(ctx context.Context) (*Karpenter, error) {
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var k *Karpenter
		if k, err = p.startOnce(ctx); err == nil {
			return k, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}

func (p process) startOnce(ctx context.Context) (*Karpenter, error) {
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	k := &Karpenter{
		Name:       p.name,
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metrics) + "/metrics",
		ReadyURL:   "http://127.0.0.1:" + strconv.Itoa(health) + "/readyz",
		exited:     make(chan struct{}),
	}
	// A new file for every start, so a restart keeps the previous log.
	if k.logFile, err = os.CreateTemp(p.workdir, p.name+"-*.log"); err != nil {
		return nil, err
	}
	k.LogPath = k.logFile.Name()
	k.cmd = exec.Command(p.bin, p.args...)
	k.cmd.Env = append(os.Environ(),
		"KUBECONFIG="+p.kubeconfig,
		"SYSTEM_NAMESPACE=kube-system",
		"DISABLE_LEADER_ELECTION=true",
		"METRICS_PORT="+strconv.Itoa(metrics),
		"HEALTH_PROBE_PORT="+strconv.Itoa(health),
	)
	k.cmd.Env = append(k.cmd.Env, p.env...)
	k.cmd.Stdout, k.cmd.Stderr = k.logFile, k.logFile
	if err := k.cmd.Start(); err != nil {
		k.logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", p.bin, err)
	}
	go func() {
		k.waitErr = k.cmd.Wait()
		k.logFile.Close()
		close(k.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, p.readyTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.ReadyURL, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return k, nil
			}
		}
		select {
		case <-k.exited:
			return nil, fmt.Errorf("%s exited before it was ready (%v); log %s ends:\n%s", p.name, k.waitErr, k.LogPath, k.LogTail(4<<10))
		case <-ctx.Done():
			_ = k.stop()
			return nil, fmt.Errorf("%s not ready at %s within %s; log %s ends:\n%s", p.name, k.ReadyURL, p.readyTimeout, k.LogPath, k.LogTail(4<<10))
		case <-tick.C:
		}
	}
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// PID returns the process id (for RSS and CPU from /proc/PID).
func (k *Karpenter) PID() int { return k.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (k *Karpenter) Exited() <-chan struct{} { return k.exited }

// Stop sends SIGTERM, waits up to StopTimeout, then SIGKILLs, and removes
// the working directory Start created (not a caller's Workdir). It is
// safe to call more than once; it returns the error of the first call: an
// exit other than by the signals it sent.
func (k *Karpenter) Stop() error {
	k.stopOnce.Do(func() {
		k.stopErr = k.stop()
		if k.removeDir != "" {
			if err := os.RemoveAll(k.removeDir); k.stopErr == nil {
				k.stopErr = err
			}
		}
	})
	return k.stopErr
}

func (k *Karpenter) stop() error {
	select {
	case <-k.exited:
		return exitError(k.waitErr)
	default:
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(StopTimeout):
		_ = k.cmd.Process.Kill()
		<-k.exited
	}
	return exitError(k.waitErr)
}

// Kill SIGKILLs the process (a crash, for restart scenarios) and waits
// until it has exited. Stop must still be called to clean up.
func (k *Karpenter) Kill() {
	_ = k.cmd.Process.Kill()
	<-k.exited
}

// exitError drops the errors of an exit by SIGTERM or SIGKILL, which Stop
// and Kill cause.
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGKILL) {
			return nil
		}
	}
	return err
}

// LogTail returns at most the last n bytes of the log, from a line start.
func (k *Karpenter) LogTail(n int) string {
	data, err := os.ReadFile(k.LogPath)
	if err != nil {
		return err.Error()
	}
	if len(data) > n {
		data = data[len(data)-n:]
		if i := strings.IndexByte(string(data), '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data)
}

// StartForTest installs Karpenter's CRDs (InstallCRDs) in c and starts
// karpenter-kwok (Start) for t, stopping it when t ends and logging the
// end of its log when t failed. It skips t, naming the fix, when -short is
// set or bin/karpenter-kwok is missing, and fails t when the binary is
// stale or the start fails.
func StartForTest(t testing.TB, c *cluster.Cluster, opts Options) *Karpenter {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped with -short")
	}
	dir := opts.BinDir
	if dir == "" {
		var err error
		if dir, err = cluster.BinDir(); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, BinaryName)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s not found: run `make karpenter-kwok` (or `make test`, which builds it)", bin)
	}
	if err := CheckBinary(bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, c); err != nil {
		t.Fatal(err)
	}
	if opts.Workdir == "" {
		opts.Workdir = t.TempDir()
	}
	k, err := Start(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("stopping %s: %v", k.Name, err)
		}
		if t.Failed() {
			t.Logf("--- %s log (last 8 KiB) ---\n%s", k.Name, k.LogTail(8<<10))
		}
	})
	return k
}
