package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// This file runs the chart's webhook "Deployment" as processes: replicas
// of karpx-webhook under the chart's ServiceAccount, behind a loopback TCP
// proxy owned by the test that stands in for Service karpx-webhook (the
// webhook configurations' URL points at it, webhookURLRenderer), and
// rolls them one at a time as the Deployment's RollingUpdate strategy and
// PodDisruptionBudget allow.

// webhookService is the test's stand-in for Service karpx-webhook: a
// loopback TCP proxy that spreads new connections over the ready
// replicas round robin, as kube-proxy spreads them over a Service's
// endpoints. A connection stays with its replica until either side closes
// it (as conntrack keeps it); a replica removed from the endpoints gets no
// new connection.
type webhookService struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	// conns counts the connections accepted; refused those closed at
	// once because no replica was ready or the chosen one refused the
	// connection.
	conns, refused atomic.Int64
	wg             sync.WaitGroup
}

// startWebhookService listens on a loopback port and serves until the
// test ends.
func (e *env) startWebhookService() *webhookService {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	s := &webhookService{ln: ln}
	s.wg.Add(1)
	go s.serve()
	e.t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// url is the service's https URL (without a path).
func (s *webhookService) url() string { return "https://" + s.ln.Addr().String() }

// setEndpoint adds (ready) or removes a replica's host:port.
func (s *webhookService) setEndpoint(backend string, ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.backends[:0]
	for _, b := range s.backends {
		if b != backend {
			kept = append(kept, b)
		}
	}
	s.backends = kept
	if ready {
		s.backends = append(s.backends, backend)
	}
}

// endpoints returns how many replicas are ready.
func (s *webhookService) endpoints() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.backends)
}

func (s *webhookService) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		s.mu.Lock()
		backend := ""
		if len(s.backends) > 0 {
			backend = s.backends[s.next%len(s.backends)]
			s.next++
		}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			if backend == "" {
				s.refused.Add(1)
				return
			}
			up, err := net.DialTimeout("tcp", backend, 3*time.Second)
			if err != nil {
				s.refused.Add(1)
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
			go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
			// Either side closing ends the connection for both.
			<-done
		}()
	}
}

// chartWebhook is the webhook Deployment's replicas as processes.
type chartWebhook struct {
	e   *env
	svc *webhookService
	// certs holds the test CA and the serving certificate for 127.0.0.1
	// every replica serves (LocalServingCertDir, LocalServingCAData).
	certs      *envtest.WebhookInstallOptions
	kubeconfig string
	replicas   []*webhookReplica
	started    int
}

// webhookReplica is one karpx-webhook process.
type webhookReplica struct {
	name, backend, probe string
	proc                 *process
}

// newChartWebhook starts the Service stand-in and makes the serving
// certificate; replicas start with start once the chart is installed.
func (e *env) newChartWebhook() *chartWebhook {
	e.t.Helper()
	certs := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	if err := certs.PrepWithoutInstalling(); err != nil {
		e.t.Fatalf("making the webhook's serving certificate: %v", err)
	}
	e.t.Cleanup(func() { _ = certs.Cleanup() })
	return &chartWebhook{e: e, svc: e.startWebhookService(), certs: certs}
}

// renderer is the post-renderer that points the chart's webhook
// configurations at the Service stand-in.
func (w *chartWebhook) renderer() *webhookURLRenderer {
	return &webhookURLRenderer{url: w.svc.url(), caBundle: w.certs.LocalServingCAData}
}

// start runs a replica of binary (a name in bin/ or an absolute path)
// under the chart's webhook ServiceAccount, waits until it is ready and
// adds it to the Service's endpoints.
func (w *chartWebhook) start(binary string) *webhookReplica {
	e := w.e
	e.t.Helper()
	if w.kubeconfig == "" {
		w.kubeconfig = e.chartServiceAccountKubeconfig(helmNamespace, chartWebhookSA)
	}
	backend, probe := freeAddr(e.t), freeAddr(e.t)
	_, port, _ := net.SplitHostPort(backend)
	r := &webhookReplica{name: "karpx-webhook-" + strconv.Itoa(w.started), backend: backend, probe: probe}
	w.started++
	// cert-manager mode: the replica serves the certificate in --cert-dir
	// and leaves the webhook configurations' caBundle alone (the
	// post-renderer set it).
	r.proc = e.startProcess(binary, r.name, []string{
		"--kubeconfig=" + w.kubeconfig,
		"--namespace=" + helmNamespace,
		"--cert-mode=cert-manager",
		"--cert-dir=" + w.certs.LocalServingCertDir,
		"--port=" + port,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=" + probe,
	}, nil)
	e.eventually(90*time.Second, r.name+" ready", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+probe+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	w.svc.setEndpoint(backend, true)
	w.replicas = append(w.replicas, r)
	return r
}

// stop takes r out of the endpoints, then sends it SIGTERM (the webhook
// server's graceful shutdown: in-flight reviews finish) and waits until
// it has exited; it returns the exit code.
func (w *chartWebhook) stop(r *webhookReplica) int {
	w.svc.setEndpoint(r.backend, false)
	r.proc.signal(syscall.SIGTERM)
	for i, x := range w.replicas {
		if x == r {
			w.replicas = append(w.replicas[:i], w.replicas[i+1:]...)
			break
		}
	}
	return r.proc.cmd.ProcessState.ExitCode()
}

// rollFigures describe one rolling update of the webhook replicas.
type rollFigures struct {
	replaced, minReady, unclean int
	took                        time.Duration
}

func (f rollFigures) String() string {
	return fmt.Sprintf("replaced=%d minReadyDuringRoll=%d uncleanExits=%d roll=%s", f.replaced, f.minReady, f.unclean, f.took.Round(100*time.Millisecond))
}

// roll replaces every replica by one of binary, one at a time, as the
// chart's Deployment strategy (maxSurge 1, maxUnavailable 0) and its
// PodDisruptionBudget (minAvailable 1) allow: a new replica starts and is
// ready before an old one leaves the endpoints and shuts down.
func (w *chartWebhook) roll(binary string) rollFigures {
	start := time.Now()
	f := rollFigures{minReady: w.svc.endpoints()}
	old := append([]*webhookReplica(nil), w.replicas...)
	for _, r := range old {
		w.start(binary)
		w.svc.mu.Lock()
		f.minReady = min(f.minReady, len(w.svc.backends)-1)
		w.svc.mu.Unlock()
		if code := w.stop(r); code != 0 {
			f.unclean++
			w.e.t.Errorf("webhook replica %s exited with code %d after SIGTERM, want a graceful shutdown (0)", r.name, code)
		}
		f.replaced++
	}
	f.took = time.Since(start)
	return f
}
