package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/karpx/karpx/webhook"
)

// TestSelfManagedCertificates runs the certificate rotator as
// cmd/karpx-webhook does against the real API server: it must fill the
// Secret, inject the CA into both webhook configurations, and (once the
// Secret is "mounted") report ready; the server then serves the
// certificate, to TLS 1.2+ clients only.
func TestSelfManagedCertificates(t *testing.T) {
	requireSuite(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name = "karpx-webhook-rotation-test"
	secretKey := types.NamespacedName{Namespace: testNamespace, Name: name}
	c := suite.client
	secretObj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}}
	if err := c.Create(ctx, secretObj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), secretObj) })
	hookFor := func(n string) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations) {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: testNamespace, Name: "karpx-webhook", Path: ptr.To("/" + n)}},
			[]admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"rotation.test.karpx.io"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"}}}}
	}
	cc, rules := hookFor("m")
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []admissionregistrationv1.MutatingWebhook{{
		Name: "m.rotation.karpx.io", ClientConfig: cc, Rules: rules, AdmissionReviewVersions: []string{"v1"},
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionregistrationv1.Ignore)}}}
	cc, rules = hookFor("v")
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{
		Name: "v.rotation.karpx.io", ClientConfig: cc, Rules: rules, AdmissionReviewVersions: []string{"v1"},
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionregistrationv1.Ignore)}}}
	for _, o := range []client.Object{mwc, vwc} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}

	certDir := t.TempDir()
	mgr, err := ctrl.NewManager(suite.cfg, ctrl.Options{Scheme: c.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	if err := webhook.AddCertRotator(mgr, webhook.CertOptions{
		Secret: secretKey, CertDir: certDir, ServiceName: "karpx-webhook",
		MutatingWebhookConfiguration: name, ValidatingWebhookConfiguration: name,
		ControllerName: fmt.Sprintf("cert-rotator-%s-%d", t.Name(), rotationRuns.Add(1)),
	}, ready); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	// The rotator fills the Secret; kubelet would then project it into the
	// pod's certificate directory, which the test does by hand.
	var secret corev1.Secret
	eventually(t, "Secret filled", func() error {
		if err := c.Get(ctx, secretKey, &secret); err != nil {
			return err
		}
		if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["ca.crt"]) == 0 {
			return errorf("Secret has keys %v", keys(secret.Data))
		}
		return nil
	})
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(certDir, f), secret.Data[f], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "caBundle injected", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(mwc), mwc); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vwc), vwc); err != nil {
			return err
		}
		if !bytes.Equal(mwc.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"]) || !bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"]) {
			return errorf("caBundle not injected yet")
		}
		return nil
	})
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("rotator never reported ready")
	}

	// Serve the rotated certificate and check the TLS floor.
	port := freePort(t)
	srv := webhook.NewServer(webhook.ServerOptions{Host: "127.0.0.1", Port: port, CertDir: certDir})
	go func() { _ = srv.Start(ctx) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitTLS(addr, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secret.Data["ca.crt"])
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "karpx-webhook." + testNamespace + ".svc"})
	if err != nil {
		t.Fatalf("TLS with the injected CA: %v", err)
	}
	if v := conn.ConnectionState().Version; v < tls.VersionTLS12 {
		t.Errorf("negotiated TLS version %x", v)
	}
	conn.Close()
	if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "karpx-webhook." + testNamespace + ".svc", MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Error("server accepted TLS 1.1")
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
