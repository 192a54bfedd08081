package webhook_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apisv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/webhook"
)

// Benchmarks and the load test run the webhook server on loopback with TLS
// and send it AdmissionReview requests over HTTP/1.1 keep-alive
// connections, as the API server does. They never assert timing.
//
//	go test ./webhook -run '^$' -bench BenchmarkAdmission -benchtime 5000x
//	go test ./webhook -run TestAdmissionLoad -karpx.load-rps 2000 -karpx.load-duration 10s -v
var (
	loadRPS        = flag.Int("karpx.load-rps", 0, "TestAdmissionLoad: requests per second to send (0 skips the test)")
	loadDuration   = flag.Duration("karpx.load-duration", 10*time.Second, "TestAdmissionLoad: how long to send")
	webhookProfile = flag.String("karpx.webhook-cpuprofile", "", "TestAdmissionLoad: write a CPU profile of the karpx-webhook process during the load to this file")
	webhookBinary  = flag.String("karpx.webhook-binary", "", "TestAdmissionLoad: karpx-webhook binary to run (default: $KARPX_PREBUILT_BIN/karpx-webhook, which make test sets, else build ./cmd/karpx-webhook)")
)

// A realistic EC2NodeClass: AL2023 alias, MIME userData with a NodeConfig
// part and a shell part, kubelet settings, block devices and tags.
const benchUserData = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0
  kubelet:
    config:
      shutdownGracePeriod: 30s
      featureGates:
        DisableKubeletCloudCredentialProviders: true

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
set -euo pipefail
echo "net.core.somaxconn = 32768" > /etc/sysctl.d/99-karpx.conf
sysctl --system
mkdir -p /etc/containerd/config.d
cat > /etc/containerd/config.d/registry.toml <<'CONF'
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://mirror.example.internal"]
CONF
yum install -y amazon-ssm-agent || true
--//--
`

// ec2NodeClassReview returns an AdmissionReview of an EC2NodeClass CREATE
// as the API server sends it after a client-side kubectl apply: the object
// carries the last-applied-configuration annotation (a second copy of the
// spec, userData included), managedFields, and the request the user info.
func ec2NodeClassReview(name, userData string) []byte {
	nc := map[string]any{
		"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"role":                       "KarpenterNodeRole-bench",
			"amiSelectorTerms":           []any{map[string]any{"alias": "al2023@latest"}},
			"subnetSelectorTerms":        []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "bench"}}},
			"securityGroupSelectorTerms": []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "bench"}}},
			"kubelet":                    map[string]any{"maxPods": 110, "systemReserved": map[string]any{"cpu": "100m", "memory": "200Mi"}},
			"blockDeviceMappings": []any{map[string]any{"deviceName": "/dev/xvda", "ebs": map[string]any{
				"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": true, "deleteOnTermination": true}}},
			"tags":     map[string]any{"team": "platform", "cost-center": "1234"},
			"userData": userData,
		},
	}
	lastApplied, _ := json.Marshal(nc)
	nc["metadata"] = map[string]any{
		"name":              name,
		"uid":               "6f1c2b9e-3d4a-4b8e-9c1f-0a2b3c4d5e6f",
		"generation":        1,
		"creationTimestamp": "2026-11-22T04:00:00Z",
		"annotations":       map[string]any{"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied) + "\n"},
		"managedFields": []any{map[string]any{
			"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "karpenter.k8s.aws/v1",
			"time": "2026-11-22T04:00:00Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{
				"f:metadata": map[string]any{"f:annotations": map[string]any{".": map[string]any{}, "f:kubectl.kubernetes.io/last-applied-configuration": map[string]any{}}},
				"f:spec": map[string]any{
					".": map[string]any{}, "f:amiSelectorTerms": map[string]any{}, "f:blockDeviceMappings": map[string]any{},
					"f:kubelet": map[string]any{".": map[string]any{}, "f:maxPods": map[string]any{}, "f:systemReserved": map[string]any{}},
					"f:role":    map[string]any{}, "f:securityGroupSelectorTerms": map[string]any{}, "f:subnetSelectorTerms": map[string]any{},
					"f:tags":     map[string]any{".": map[string]any{}, "f:cost-center": map[string]any{}, "f:team": map[string]any{}},
					"f:userData": map[string]any{},
				},
			},
		}},
	}
	raw, _ := json.Marshal(nc)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "bench",
			Kind:      metav1.GroupVersionKind{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"},
			Resource:  metav1.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"},
			Name:      name,
			Operation: admissionv1.Create,
			UserInfo:  authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}},
			Object:    runtime.RawExtension{Raw: raw},
			DryRun:    new(bool),
			Options:   runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-client-side-apply","fieldValidation":"Strict"}`)},
		},
	}
	body, _ := json.Marshal(review)
	return body
}

type benchServer struct {
	url    string
	client *http.Client
}

// startBenchServer serves the webhook on 127.0.0.1 with a fresh
// self-signed certificate until the test ends.
func startBenchServer(tb testing.TB) *benchServer {
	tb.Helper()
	dir := tb.TempDir()
	pool := writeSelfSignedCert(tb, dir)
	port := freePort(tb)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apisv1.AddToScheme(scheme)
	reader := fake.NewClientBuilder().WithScheme(scheme).Build()
	srv := webhook.NewServer(webhook.ServerOptions{Host: "127.0.0.1", Port: port, CertDir: dir})
	webhook.Register(srv, reader, webhook.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Start(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitTLS(addr, 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	return newBenchClient(addr, pool)
}

// newBenchClient returns a client for the webhook at addr (host:port) that
// trusts pool.
func newBenchClient(addr string, pool *x509.CertPool) *benchServer {
	return &benchServer{
		url: "https://" + addr,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			// Like the API server, reuse a bounded set of connections
			// rather than opening (and handshaking) one per request.
			MaxConnsPerHost:     32,
			MaxIdleConns:        32,
			MaxIdleConnsPerHost: 32,
		}},
	}
}

func writeSelfSignedCert(tb testing.TB, dir string) *x509.CertPool {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	return pool
}

// post sends one review and checks the answer is allowed as expected.
func (s *benchServer) post(path string, body []byte, wantAllowed bool) error {
	resp, err := s.client.Post(s.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, out)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil {
		return err
	}
	if review.Response == nil || review.Response.Allowed != wantAllowed {
		return fmt.Errorf("unexpected response %s", out)
	}
	return nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
}

// BenchmarkAdmissionEC2NodeClass measures one request at a time (latency
// without queueing) for an admitted realistic EC2NodeClass, a denied one,
// and one with about 12 KiB of userData.
func BenchmarkAdmissionEC2NodeClass(b *testing.B) {
	s := startBenchServer(b)
	large := benchUserData[:strings.LastIndex(benchUserData, "--//--")] + strings.Repeat("echo 'padding line for a large but legal script'\n", 240) + "--//--\n"
	cases := []struct {
		name    string
		body    []byte
		allowed bool
	}{
		{"admitted", ec2NodeClassReview("bench", benchUserData), true},
		{"denied", ec2NodeClassReview("bench", strings.Replace(benchUserData, "sysctl --system", "sysctl --system\nsystemctl restart containerd", 1)), false},
		{"12KiB", ec2NodeClassReview("bench", large), true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := s.post(webhook.ValidateEC2NodeClassPath, c.body, c.allowed); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(len(c.body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if err := s.post(webhook.ValidateEC2NodeClassPath, c.body, c.allowed); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportLatencies(b, lat)
		})
	}
}

// BenchmarkAdmissionEC2NodeClassParallel measures throughput with
// 4×GOMAXPROCS concurrent clients.
func BenchmarkAdmissionEC2NodeClassParallel(b *testing.B) {
	s := startBenchServer(b)
	body := ec2NodeClassReview("bench", benchUserData)
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			start := time.Now()
			if err := s.post(webhook.ValidateEC2NodeClassPath, body, true); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	b.StopTimer()
	reportLatencies(b, lat)
}

// TestAdmissionLoad measures the running webhook the way the API server
// sees it: the real karpx-webhook binary (built from cmd/karpx-webhook, or
// -karpx.webhook-binary) runs in its own process against the suite's
// kube-apiserver, with its own runtime settings, and this process sends it
// realistic EC2NodeClass reviews at a fixed rate (open loop: a request
// starts every 1/rps whatever the previous ones do, at most 512 in flight).
// It logs latency percentiles, the achieved rate and the server's CPU time
// per request. It runs only with -karpx.load-rps, is bounded by
// -karpx.load-duration (at most 5m), and only targets 127.0.0.1.
func TestAdmissionLoad(t *testing.T) {
	if *loadRPS <= 0 {
		t.Skip("set -karpx.load-rps (e.g. 2000) to run the load test")
	}
	if *loadDuration <= 0 || *loadDuration > 5*time.Minute {
		t.Fatalf("-karpx.load-duration must be in (0, 5m]")
	}
	requireSuite(t)
	s := startWebhookProcess(t)
	// Distinct objects, as from many kubectl applies: each has its own
	// name, tags and userData, so nothing can be answered from a cache.
	bodies := make([][]byte, 256)
	for i := range bodies {
		ud := strings.Replace(benchUserData, "set -euo pipefail", fmt.Sprintf("set -euo pipefail\n# build %d", i), 1)
		bodies[i] = ec2NodeClassReview(fmt.Sprintf("load-%d", i), ud)
	}
	for i := 0; i < 200; i++ { // warm up connections and code paths
		if err := s.post(webhook.ValidateEC2NodeClassPath, bodies[i%len(bodies)], true); err != nil {
			t.Fatal(err)
		}
	}
	cpu0, self0 := s.cpuTime(t), processCPU(t, os.Getpid())
	profiled := s.profile(t, *loadDuration)
	interval := time.Second / time.Duration(*loadRPS)
	total := int(loadDuration.Seconds() * float64(*loadRPS))
	lat := make([]time.Duration, total)
	errs := make([]error, total)
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	start := time.Now()
	dropped := 0
	for i := 0; i < total; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case sem <- struct{}{}:
		default:
			dropped++
			errs[i] = fmt.Errorf("dropped: 512 requests in flight")
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			errs[i] = s.post(webhook.ValidateEC2NodeClassPath, bodies[i%len(bodies)], true)
			lat[i] = time.Since(t0)
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu, self := s.cpuTime(t)-cpu0, processCPU(t, os.Getpid())-self0
	<-profiled
	var ok []time.Duration
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			continue
		}
		ok = append(ok, lat[i])
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i] < ok[j] })
	t.Logf("target %d req/s for %s: sent %d in %s (%.0f req/s achieved), %d failed (%d dropped); body %d bytes",
		*loadRPS, *loadDuration, total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), failed, dropped, len(bodies[0]))
	t.Logf("latency p50 %s  p90 %s  p99 %s  p99.9 %s  max %s",
		percentile(ok, 0.50), percentile(ok, 0.90), percentile(ok, 0.99), percentile(ok, 0.999), percentile(ok, 1))
	// Per answered request: a dropped one never reached the webhook.
	t.Logf("CPU: karpx-webhook %s (%.0f µs per answered request, %.2f cores), load generator %.2f cores, of %d",
		cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(max(len(ok), 1)), cpu.Seconds()/elapsed.Seconds(), self.Seconds()/elapsed.Seconds(), goruntime.NumCPU())
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("load average (1, 5, 15 min): %s", strings.Join(strings.Fields(string(l))[:3], " "))
	}
	t.Logf("memory: karpx-webhook peak RSS %s", s.peakRSS(t))
	if failed > 0 {
		t.Errorf("%d requests failed; first: %v", failed, firstErr(errs))
	}
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
