package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/karpx/karpx/test/cluster"
)

// hostIP returns an IPv4 address of this machine outside loopback, which
// the API server's service proxy may dial: Endpoints refuse loopback
// addresses (Kubernetes' ValidateEndpointIP). The test is skipped without
// one.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address for the service proxy to reach the controller on")
	return ""
}

// freePortOn returns a port free on ip.
func freePortOn(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// controllerService is a karpx-controller started as a process with its
// metrics and status ports on this machine's address, behind a
// selector-less Service karpx/karpx-controller with ports named metrics
// and status (as manifests/controller/service.yaml) whose Endpoints name
// that address as a Pod's: what the API server's service proxy reaches in
// a cluster.
type controllerService struct {
	metrics, status string // host:port
}

// startControllerBehindService starts the controller with args (after
// its metrics and status addresses) and the Service, and waits until the
// status port answers.
func (e *env) startControllerBehindService(args ...string) controllerService {
	e.t.Helper()
	ip := hostIP(e.t)
	mPort, sPort := freePortOn(e.t, ip), freePortOn(e.t, ip)
	c := controllerService{metrics: net.JoinHostPort(ip, strconv.Itoa(mPort)), status: net.JoinHostPort(ip, strconv.Itoa(sPort))}
	e.startController(e.controllerKubeconfig(), "karpx-status", append([]string{
		"--metrics-bind-address=" + c.metrics, "--status-bind-address=" + c.status}, args...)...)

	cs, err := kubernetes.NewForConfig(e.cluster.RESTConfig)
	if err != nil {
		e.t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Name: "karpx-controller", Namespace: "karpx"}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "metrics", Port: int32(mPort), TargetPort: intstr.FromInt32(int32(mPort))},
		{Name: "status", Port: int32(sPort), TargetPort: intstr.FromInt32(int32(sPort))},
	}}}
	// The service proxy dials only addresses of Pods (Kubernetes v1.35
	// pkg/registry/core/service/storage ResourceLocation, isValidAddress):
	// a Pod that stands for the controller's, never scheduled (no node
	// matches its selector), with this machine's address as its IP.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "karpx-controller-0", Namespace: "karpx"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"karpx.test/no-such-node": "true"},
		Containers:   []corev1.Container{{Name: "controller", Image: "registry.k8s.io/pause:3.10"}},
	}}
	_ = cs.CoreV1().Pods("karpx").Delete(e.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	e.eventually(30*time.Second, "the previous stand-in Pod gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods("karpx").Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := cs.CoreV1().Pods("karpx").Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// A merge patch: kube-scheduler writes the Pod's conditions meanwhile.
	patch := fmt.Sprintf(`{"status":{"podIP":%q,"podIPs":[{"ip":%q}]}}`, ip, ip)
	if _, err := cs.CoreV1().Pods("karpx").Patch(e.ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		e.t.Fatal(err)
	}
	//lint:ignore SA1019 the service proxy resolves core/v1 Endpoints (ResourceLocation, as above), not EndpointSlices
	eps := &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: ip, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "karpx", Name: pod.Name}}},
		Ports:     []corev1.EndpointPort{{Name: "metrics", Port: int32(mPort)}, {Name: "status", Port: int32(sPort)}},
	}}}
	_ = cs.CoreV1().Services("karpx").Delete(e.ctx, meta.Name, metav1.DeleteOptions{})
	_ = cs.CoreV1().Endpoints("karpx").Delete(e.ctx, meta.Name, metav1.DeleteOptions{})
	if _, err := cs.CoreV1().Services("karpx").Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := cs.CoreV1().Endpoints("karpx").Create(e.ctx, eps, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx := context.Background()
		_ = cs.CoreV1().Services("karpx").Delete(ctx, meta.Name, metav1.DeleteOptions{})
		_ = cs.CoreV1().Endpoints("karpx").Delete(ctx, meta.Name, metav1.DeleteOptions{})
		_ = cs.CoreV1().Pods("karpx").Delete(ctx, "karpx-controller-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	e.eventually(60*time.Second, "the controller's status port answering /throttle", func(ctx context.Context) (bool, error) {
		code, _, err := scrapeStatus(ctx, "http://"+c.status+"/throttle", "")
		return err == nil && code == http.StatusOK, nil
	})
	return c
}

// scrapeStatus GETs url (with token as bearer token when set) and returns
// the status code and body.
func scrapeStatus(ctx context.Context, url, token string) (int, string, error) {
	req, err := newMetricsRequest(ctx, url, token)
	if err != nil {
		return 0, "", err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, rerr := resp.Body.Read(buf)
		b.Write(buf[:n])
		if rerr != nil {
			break
		}
	}
	return resp.StatusCode, b.String(), nil
}

// kubectlResult runs kubectl with args as the cluster's admin, the plugin
// on PATH path, and returns its output and error (kubectlWithPath fails
// the test instead).
func (e *env) kubectlResult(path string, args ...string) (string, error) {
	cmd := exec.CommandContext(e.ctx, "kubectl", args...)
	cmd.Env = append(cmd.Environ(), "PATH="+path, "KUBECONFIG="+e.cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// checkStatusCommands runs kubectl karpx throttle, capacity and status
// with their default Service and port (karpx/karpx-controller:status)
// through the API server's service proxy, and fails the test unless each
// answers from the controller.
func (e *env) checkStatusCommands(path string) {
	e.t.Helper()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"karpx", "throttle", "-o", "json"}, `"kind": "EC2APIBudget"`},
		{[]string{"karpx", "capacity", "--all", "-o", "json"}, `"kind": "CapacityReport"`},
		{[]string{"karpx", "status"}, ""},
	} {
		out, err := e.kubectlResult(path, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) || strings.Contains(out, "unavailable") {
			e.t.Errorf("kubectl %s through the service proxy: %v, want %q and nothing unavailable:\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
	}
}

// TestStatusThroughServiceProxyWithSecureMetrics (issue 34): the
// karpx-controller binary with its default flags, so /metrics is HTTPS
// behind controller-runtime's TokenReview and SubjectAccessReview filter,
// and its status endpoints on their own plain-HTTP port, behind a Service
// as in a cluster. kubectl karpx throttle, capacity and status, with their
// default --port (status), answer through the API server's service proxy,
// as the cluster admin and, for throttle, as a user bound only to Role
// karpx-throttle-reader of manifests/controller. /metrics refuses a scrape
// without a token (401) and serves one with a karpx-metrics-reader token.
// Control, why the status endpoints cannot share the secured port: the
// same proxy to the metrics port is refused even for the cluster admin,
// who may get /metrics (401: the proxy passes no user token on), and
// kubectl karpx throttle --port metrics fails.
func TestStatusThroughServiceProxyWithSecureMetrics(t *testing.T) {
	e := newEnvWith(t, "karpx-status-proxy", envOptions{noAutoscaler: true})
	path := buildPlugin(t, e.root)
	c := e.startControllerBehindService()
	e.checkStatusCommands(path)

	// A user with only Role karpx-throttle-reader (manifests/controller).
	e.kubectlWithPath(path, "-n", "karpx", "create", "serviceaccount", "status-reader")
	e.kubectlWithPath(path, "-n", "karpx", "create", "rolebinding", "status-reader", "--role=karpx-throttle-reader", "--serviceaccount=karpx:status-reader")
	can, _ := e.kubectlResult(path, "auth", "can-i", "get", "services/karpx-controller:status", "--subresource=proxy", "-n", "karpx", "--as=system:serviceaccount:karpx:status-reader")
	if strings.TrimSpace(can) != "yes" {
		t.Errorf("karpx-throttle-reader: can-i get services/proxy karpx-controller:status = %q, want yes", can)
	}
	readerCfg, err := cluster.ServiceAccountConfig(e.ctx, e.cluster.RESTConfig, "karpx", "status-reader", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	reader := filepath.Join(t.TempDir(), "status-reader.kubeconfig")
	if err := cluster.WriteKubeconfig(readerCfg, reader); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(e.ctx, "kubectl", "karpx", "throttle", "-o", "json")
	cmd.Env = append(cmd.Environ(), "PATH="+path, "KUBECONFIG="+reader)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"kind": "EC2APIBudget"`) {
		t.Errorf("kubectl karpx throttle as a karpx-throttle-reader: %v\n%s", err, out)
	}

	// /metrics: secured by default.
	token := e.metricsReaderToken()
	e.eventually(30*time.Second, "/metrics served to a karpx-metrics-reader", func(ctx context.Context) (bool, error) {
		code, body, err := scrapeStatus(ctx, "https://"+c.metrics+"/metrics", token)
		return err == nil && code == http.StatusOK && strings.Contains(body, "karpenter_"), nil
	})
	if code, body, err := scrapeStatus(e.ctx, "https://"+c.metrics+"/metrics", ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d %v, want 401: %.200s", code, err, body)
	}

	// Control: the secured port through the service proxy, as the admin.
	admin, err := kubernetes.NewForConfig(e.cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := admin.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/namespaces/karpx/services/https:karpx-controller:metrics/proxy/metrics").DoRaw(e.ctx)
	var status *apierrors.StatusError
	if err == nil {
		t.Errorf("control: the admin read the secured /metrics through the service proxy: %.200s", raw)
	} else if !errors.As(err, &status) || status.ErrStatus.Code != http.StatusUnauthorized {
		t.Errorf("control: the service proxy to the secured metrics port: %v, want 401 (no token passed on)", err)
	}
	if out, err := e.kubectlResult(path, "karpx", "throttle", "--port", "metrics"); err == nil {
		t.Errorf("control: kubectl karpx throttle --port metrics answered:\n%s", out)
	}
}

// TestMetricsPlainWhenSecureOff is the control of the default: with
// --metrics-secure=false the controller serves /metrics over plain HTTP to
// a scrape without a token, and the status commands work as with it on.
func TestMetricsPlainWhenSecureOff(t *testing.T) {
	e := newEnvWith(t, "karpx-metrics-plain", envOptions{noAutoscaler: true})
	path := buildPlugin(t, e.root)
	c := e.startControllerBehindService("--metrics-secure=false")
	e.checkStatusCommands(path)
	e.eventually(30*time.Second, "/metrics served over plain HTTP without a token", func(ctx context.Context) (bool, error) {
		code, body, err := scrapeStatus(ctx, "http://"+c.metrics+"/metrics", "")
		return err == nil && code == http.StatusOK && strings.Contains(body, "karpenter_"), nil
	})
}
