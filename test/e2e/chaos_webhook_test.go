package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/test/cluster"
)

// webhookServer is karpx-webhook run as its own process under
// ServiceAccount karpx-system/karpx-webhook, registered with the API server
// by the configurations of manifests/webhook/webhooks.yaml (their service
// references rewritten to its loopback URL and a test CA, as envtest does).
type webhookServer struct {
	env        *env
	install    *envtest.WebhookInstallOptions
	kubeconfig string
	probe      string // host:port of /readyz
	metrics    string // --metrics-bind-address ("0": off)
	proc       *process
}

// startWebhook installs the webhook configurations and starts karpx-webhook.
func (e *env) startWebhook() *webhookServer {
	e.t.Helper()
	return e.startWebhookWithMetrics("0")
}

// startWebhookWithMetrics is startWebhook with karpx-webhook serving
// /metrics on metricsAddr (host:port; "0" turns it off).
func (e *env) startWebhookWithMetrics(metricsAddr string) *webhookServer {
	e.t.Helper()
	w := &webhookServer{env: e, metrics: metricsAddr, install: &envtest.WebhookInstallOptions{
		Paths:            []string{filepath.Join(e.root, "manifests", "webhook", "webhooks.yaml")},
		LocalServingHost: "127.0.0.1",
	}}
	if err := w.install.Install(e.cluster.RESTConfig); err != nil {
		e.t.Fatalf("installing the webhook configurations: %v", err)
	}
	e.t.Cleanup(func() { _ = w.install.Cleanup() })
	sa := cluster.ServiceAccountForTest(e.t, e.cluster.RESTConfig, filepath.Join(e.root, "manifests", "webhook"), "karpx-system", "karpx-webhook")
	w.kubeconfig = filepath.Join(e.t.TempDir(), "karpx-webhook.kubeconfig")
	if err := cluster.WriteKubeconfig(sa, w.kubeconfig); err != nil {
		e.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	w.probe = ln.Addr().String()
	ln.Close()
	w.start("karpx-webhook-0")
	return w
}

// start runs the karpx-webhook process and waits until it is ready.
func (w *webhookServer) start(name string) {
	w.env.t.Helper()
	w.proc = w.env.startProcess("karpx-webhook", name, []string{
		"--kubeconfig=" + w.kubeconfig,
		"--namespace=karpx-system",
		"--cert-mode=cert-manager",
		"--cert-dir=" + w.install.LocalServingCertDir,
		"--port=" + strconv.Itoa(w.install.LocalServingPort),
		"--metrics-bind-address=" + w.metrics,
		"--health-probe-bind-address=" + w.probe,
	}, nil)
	w.env.eventually(60*time.Second, "karpx-webhook ready", func(ctx context.Context) (bool, error) {
		resp, err := http.Get("http://" + w.probe + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// webhookUnsafeNodeClass restarts the kubelet in its userData, which the
// validating webhook denies (KX003).
func webhookUnsafeNodeClass(cluster string) string {
	return nodeClass{Name: "chaos-unsafe", UserData: "#!/bin/bash\nsystemctl restart kubelet"}.yaml(cluster)
}

// TestChaosWebhookDown: karpx-webhook is SIGKILLed while the workload
// scales. The autoscaler does not depend on it: provisioning goes on, and
// so does scale-down (NodeClaims deleted, drained, terminated: finalizer
// removals are metadata writes no webhook intercepts). NodePool edits are
// admitted unchanged (failurePolicy Ignore, both webhooks); EC2NodeClass
// creates and updates are refused with the API server's "failed calling
// webhook" message (failurePolicy Fail, see manifests/webhook/webhooks.yaml).
// Once the webhook is back, EC2NodeClasses are admitted or denied on their
// content again and the workload converges.
func TestChaosWebhookDown(t *testing.T) {
	runInParallel(t)
	c := newChaosEnv(t, "karpx-chaos-webhook")
	w := c.startWebhook()
	n := int32(2 * chaosScale())
	c.scale(n, 120*time.Second)
	unsafe := webhookUnsafeNodeClass(c.name)
	if _, err := c.cluster.Kubectl(c.ctx, []byte(unsafe), "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), `admission webhook "ec2nodeclasses.karpx.io" denied the request`) {
		t.Fatalf("with the webhook up, the kubelet-restarting EC2NodeClass: %v, want a denial", err)
	}
	c.rememberHealthy()

	w.proc.kill()
	start := time.Now()
	// Provisioning.
	c.scale(2*n, 180*time.Second)
	// NodePool edits pass (failurePolicy Ignore).
	if _, err := c.cluster.Kubectl(c.ctx, nil, "patch", "nodepool", "chaos", "--type=merge", "-p", `{"spec":{"disruption":{"budgets":[{"nodes":"50%"}]}}}`); err != nil {
		t.Errorf("NodePool edit with the webhook down: %v, want admitted (failurePolicy Ignore)", err)
	}
	// EC2NodeClass writes fail, naming the webhook (failurePolicy Fail).
	safe := ec2NodeClassYAML("chaos-later", c.name)
	_, err := c.cluster.Kubectl(c.ctx, []byte(safe), "apply", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), `failed calling webhook "ec2nodeclasses.karpx.io"`) {
		t.Errorf("EC2NodeClass create with the webhook down: %v, want refused: failed calling webhook (failurePolicy Fail)", err)
	}
	refusal := ""
	if err != nil {
		// From `failed calling webhook "ec2nodeclasses.karpx.io"` up to
		// the URL, which changes from run to run.
		refusal = err.Error()
		if i := strings.Index(refusal, "failed calling webhook"); i >= 0 {
			refusal = refusal[i:]
		}
		if i := strings.Index(refusal, ": failed to call webhook"); i >= 0 {
			refusal = refusal[:i]
		}
	}
	// Scale-down: the workload shrinks and the NodeClaims launched during
	// the outage are deleted; each must drain and terminate.
	c.setReplicas(n)
	var claims karpv1.NodeClaimList
	if err := c.kube.List(c.ctx, &claims); err != nil {
		t.Fatal(err)
	}
	var deleted, nodes []string
	for _, nc := range claims.Items {
		if _, old := c.healthyNodes[nc.Status.NodeName]; !old {
			deleted = append(deleted, nc.Name)
			nodes = append(nodes, nc.Status.NodeName)
		}
	}
	if len(deleted) == 0 {
		t.Fatal("no NodeClaim launched during the outage")
	}
	if _, err := c.cluster.Kubectl(c.ctx, nil, append([]string{"delete", "nodeclaim", "--wait=false"}, deleted...)...); err != nil {
		t.Fatal(err)
	}
	c.eventually(120*time.Second, "the deleted NodeClaims and their Nodes gone", func(ctx context.Context) (bool, error) {
		for i := range deleted {
			if err := c.kube.Get(ctx, types.NamespacedName{Name: deleted[i]}, &karpv1.NodeClaim{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			if err := c.kube.Get(ctx, types.NamespacedName{Name: nodes[i]}, &corev1.Node{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	c.waitRunning(n, 120*time.Second)
	down := time.Since(start)

	w.start("karpx-webhook-1")
	if _, err := c.cluster.Kubectl(c.ctx, []byte(safe), "apply", "-f", "-"); err != nil {
		t.Errorf("EC2NodeClass create with the webhook back: %v", err)
	}
	if _, err := c.cluster.Kubectl(c.ctx, []byte(unsafe), "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("with the webhook back, the kubelet-restarting EC2NodeClass: %v, want a denial", err)
	}
	c.scale(3*n, 180*time.Second)
	c.check("webhook-down", down, fmt.Sprintf("deletedDuringOutage=%d nodePoolEdit=admitted ec2NodeClassCreate=%q", len(deleted), refusal))
}
