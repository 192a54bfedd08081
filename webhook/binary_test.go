package webhook_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/karpx/karpx/webhook"
)

// TestWebhookBinaryServes runs cmd/karpx-webhook as deployed with
// --cert-mode cert-manager (a mounted certificate) against the suite's API
// server and checks what only the binary wires: readiness, TLS 1.2 as the
// floor, and the validating handler answering through the real server.
func TestWebhookBinaryServes(t *testing.T) {
	requireSuite(t)
	s := startWebhookProcess(t)
	if err := s.post(webhook.ValidateEC2NodeClassPath, ec2NodeClassReview("ok", benchUserData), true); err != nil {
		t.Fatalf("admitted review: %v", err)
	}
	denied := ec2NodeClassReview("restarts", strings.Replace(benchUserData, "sysctl --system", "sysctl --system\nsystemctl restart kubelet", 1))
	if err := s.post(webhook.ValidateEC2NodeClassPath, denied, false); err != nil {
		t.Fatalf("denied review: %v", err)
	}
	addr := strings.TrimPrefix(s.url, "https://")
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}) //nolint:gosec // checking the server refuses it
	if err == nil {
		conn.Close()
		t.Fatal("karpx-webhook accepted a TLS 1.1 handshake")
	}
}

// webhookProcess is a karpx-webhook process started by startWebhookProcess.
type webhookProcess struct {
	*benchServer
	pid       int
	pprofAddr string // host:port of /debug/pprof, when profiling
}

// profile fetches a CPU profile of the process over d into
// -karpx.webhook-cpuprofile, when set; the channel closes when done.
func (p *webhookProcess) profile(t *testing.T, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if p.pprofAddr == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.pprofAddr, int(d.Seconds())))
		if err != nil {
			t.Errorf("CPU profile: %v", err)
			return
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(*webhookProfile, out, 0o600)
		}
		if err != nil {
			t.Errorf("CPU profile: %v", err)
		}
	}()
	return done
}

// cpuTime returns the process's CPU time so far.
func (p *webhookProcess) cpuTime(t *testing.T) time.Duration { return processCPU(t, p.pid) }

// peakRSS returns the process's peak resident set size (VmHWM of
// /proc/PID/status), as printed there, e.g. "41236 kB".
func (p *webhookProcess) peakRSS(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// processCPU returns a process's user+system CPU time so far, read from
// /proc/PID/stat (Linux; the load test needs it only for the figures).
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Logf("reading CPU time: %v", err)
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of proc(5), in clock ticks (USER_HZ, 100 on Linux).
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// startWebhookProcess runs the karpx-webhook binary against the suite's API
// server with a self-signed serving certificate (--cert-mode cert-manager:
// the certificate is mounted, not rotated), metrics off unless extra
// (further flags, which win over these) turns them on, and waits for
// /readyz. The process is killed when the test ends.
func startWebhookProcess(t *testing.T, extra ...string) *webhookProcess {
	t.Helper()
	bin := *webhookBinary
	if prebuilt := os.Getenv("KARPX_PREBUILT_BIN"); bin == "" && prebuilt != "" {
		// `make test` has just built bin/ from this tree.
		if _, err := os.Stat(filepath.Join(prebuilt, "karpx-webhook")); err == nil {
			bin = filepath.Join(prebuilt, "karpx-webhook")
		}
	}
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "karpx-webhook")
		build := exec.Command("go", "build", "-o", bin, "./cmd/karpx-webhook")
		build.Dir = suite.root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building karpx-webhook: %v\n%s", err, out)
		}
	}
	dir := t.TempDir()
	pool := writeSelfSignedCert(t, dir)
	port, probePort := freePort(t), freePort(t)
	cmd := exec.Command(bin,
		"--kubeconfig", suite.webhookKubeconfig,
		"--namespace", testNamespace,
		"--cert-mode", webhook.CertModeCertManager,
		"--cert-dir", dir,
		"--port", strconv.Itoa(port),
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort)),
	)
	cmd.Args = append(cmd.Args, extra...)
	pprofAddr := ""
	if *webhookProfile != "" {
		pprofAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		cmd.Args = append(cmd.Args, "--pprof-bind-address", pprofAddr)
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("karpx-webhook output:\n%s", logs.String())
		}
	})
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("karpx-webhook not ready after 30s (last: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &webhookProcess{benchServer: newBenchClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), pool), pid: cmd.Process.Pid, pprofAddr: pprofAddr}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
