package webhook_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/karpx/karpx/test/cluster"
	"github.com/karpx/karpx/webhook"
)

// TestSelfSignedRotationUnderServiceAccount runs the webhook in self-signed
// mode (CertRotator) as ServiceAccount karpx-system/karpx-webhook with
// the RBAC of manifests/webhook, on the real webhook configurations
// (karpx-webhook, the names the RBAC allows), against the real API server:
// the rotator fills Secret karpx-webhook-cert and injects its CA into both
// configurations, and the API server calls the webhook with that CA (a
// NodePool is mutated, an EC2NodeClass denied). Then a CA expiring within
// the rotator's lookahead (90 days) is written into the Secret, as an old
// installation would hold: the rotator must write a new CA and serving
// certificate, update both caBundles, and admission must keep working with
// the new pair. Any Forbidden answer logged by the manager fails the test.
func TestSelfSignedRotationUnderServiceAccount(t *testing.T) {
	requireSuite(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := suite.client
	saCfg, err := clientcmd.BuildConfigFromFlags("", suite.webhookKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	const name = "karpx-webhook"
	secretKey := types.NamespacedName{Namespace: testNamespace, Name: "karpx-webhook-cert"}

	// The empty Secret ships in manifests/webhook/config.yaml.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretKey.Name, Namespace: secretKey.Namespace}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), secret) })

	// Point the suite's configurations at this test's server by URL (the
	// certificate is made valid for localhost), with no caBundle; restore
	// them afterwards for the other tests.
	port := freePort(t)
	redirect := func(cc *admissionregistrationv1.WebhookClientConfig) {
		path := ""
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		} else if cc.URL != nil {
			u, err := url.Parse(*cc.URL)
			if err != nil {
				t.Fatal(err)
			}
			path = u.Path
		}
		u := fmt.Sprintf("https://localhost:%d%s", port, path)
		cc.URL, cc.Service, cc.CABundle = &u, nil, nil
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, mwc); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, vwc); err != nil {
		t.Fatal(err)
	}
	origM, origV := mwc.DeepCopy(), vwc.DeepCopy()
	for i := range mwc.Webhooks {
		redirect(&mwc.Webhooks[i].ClientConfig)
	}
	for i := range vwc.Webhooks {
		redirect(&vwc.Webhooks[i].ClientConfig)
	}
	if err := c.Update(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		for _, restore := range []func() error{
			func() error {
				cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
				if err := c.Get(bg, client.ObjectKey{Name: name}, cur); err != nil {
					return err
				}
				cur.Webhooks = origM.Webhooks
				return c.Update(bg, cur)
			},
			func() error {
				cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				if err := c.Get(bg, client.ObjectKey{Name: name}, cur); err != nil {
					return err
				}
				cur.Webhooks = origV.Webhooks
				return c.Update(bg, cur)
			},
		} {
			if err := restore(); err != nil {
				t.Errorf("restoring the suite's webhook configuration: %v", err)
			}
		}
	})

	// The webhook as cmd/karpx-webhook runs it in self mode, on the
	// ServiceAccount's token.
	certDir := t.TempDir()
	opts := webhook.Options{TaintRulesConfigMap: types.NamespacedName{Namespace: testNamespace, Name: "karpx-webhook-startup-taints"}}
	mgr, err := ctrl.NewManager(saCfg, ctrl.Options{
		Scheme:  c.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   webhook.CacheOptions(opts),
		Logger:  cluster.FailOnForbidden(t, funcr.New(func(string, string) {}, funcr.Options{})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	if err := webhook.AddCertRotator(mgr, webhook.CertOptions{
		Secret: secretKey, CertDir: certDir, ServiceName: "karpx-webhook",
		MutatingWebhookConfiguration: name, ValidatingWebhookConfiguration: name,
		ExtraDNSNames: []string{"localhost"},
		// Unique per run: controller names are checked process-wide (-count).
		ControllerName: fmt.Sprintf("cert-rotator-%s-%d", t.Name(), rotationRuns.Add(1)),
	}, ready); err != nil {
		t.Fatal(err)
	}
	srv := webhook.NewServer(webhook.ServerOptions{Host: "127.0.0.1", Port: port, CertDir: certDir})
	webhook.Register(srv, mgr.GetCache(), opts)
	mgrDone := make(chan struct{})
	go func() {
		defer close(mgrDone)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	defer func() { cancel(); <-mgrDone }()

	// waitPair waits until the Secret holds a CA other than notCA with a
	// serving certificate for localhost signed by it, "mounts" the Secret
	// (kubelet's projection), waits until both configurations' caBundles
	// carry that CA, and returns it.
	waitPair := func(what string, notCA []byte) []byte {
		t.Helper()
		var ca []byte
		eventuallyFor(t, 30*time.Second, what, func() error {
			if err := c.Get(ctx, secretKey, secret); err != nil {
				return err
			}
			ca = secret.Data["ca.crt"]
			if len(ca) == 0 || len(secret.Data["tls.crt"]) == 0 || bytes.Equal(ca, notCA) {
				return fmt.Errorf("Secret not (re)written yet: keys %v", keys(secret.Data))
			}
			return verifyServing(ca, secret.Data["tls.crt"])
		})
		for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
			tmp := filepath.Join(certDir, "."+f)
			if err := os.WriteFile(tmp, secret.Data[f], 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(certDir, f)); err != nil {
				t.Fatal(err)
			}
		}
		eventuallyFor(t, 30*time.Second, what+": caBundles", func() error {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, mwc); err != nil {
				return err
			}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, vwc); err != nil {
				return err
			}
			for _, cc := range []admissionregistrationv1.WebhookClientConfig{mwc.Webhooks[0].ClientConfig, vwc.Webhooks[0].ClientConfig, vwc.Webhooks[len(vwc.Webhooks)-1].ClientConfig} {
				if !bytes.Equal(cc.CABundle, ca) {
					return fmt.Errorf("caBundle not injected yet")
				}
			}
			return nil
		})
		return ca
	}
	// serving waits until the server presents a certificate ca verifies
	// for localhost.
	serving := func(ca []byte) {
		t.Helper()
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		eventuallyFor(t, 30*time.Second, "server presents the new certificate", func() error {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
				&tls.Config{RootCAs: pool, ServerName: "localhost"})
			if err != nil {
				return err
			}
			return conn.Close()
		})
	}
	// admits checks both webhooks through the API server: the mutation
	// (withCilium probes until the startup taint is injected) and the
	// EC2NodeClass denial, which with failurePolicy Fail would be a TLS
	// error instead if the caBundle did not match.
	admits := func() {
		t.Helper()
		withCilium(t)
		_, stderr, err := kubectl(t, unsafeEC2NodeClass, "apply", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(stderr, `admission webhook "ec2nodeclasses.karpx.io" denied the request`) {
			t.Fatalf("EC2NodeClass through the rotated webhook: %v\n%s", err, stderr)
		}
	}

	first := waitPair("Secret filled and caBundles injected", nil)
	go func() { _ = srv.Start(ctx) }()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("rotator never reported ready")
	}
	serving(first)
	admits()

	// Rotation: a CA that expires in an hour, inside the lookahead, with a
	// serving certificate of its own, as an old Secret would hold.
	oldCA, oldCert, oldKey := expiringPair(t, time.Hour)
	secret.Data = map[string][]byte{"ca.crt": oldCA, "ca.key": oldKey, "tls.crt": oldCert, "tls.key": oldKey}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	second := waitPair("new CA written and injected after the expiring one", oldCA)
	if bytes.Equal(second, first) {
		t.Fatal("the rotator restored the first CA instead of generating a new one")
	}
	serving(second)
	admits()
	checkWebhookRBAC(t)
}

// webhookRBACAllowlist are permissions manifests/webhook grants that the
// rotation test does not exercise, each with why the webhook needs it.
var webhookRBACAllowlist = map[cluster.Permission]string{
	{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}:        "the metrics server's authentication filter (--metrics-secure, the default) reviews a scrape's bearer token: used only once /metrics is scraped (TestWebhookMetricsNeedAuthentication's process, this ServiceAccount), which may run after the rotation test",
	{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}: "the metrics server's authorization filter (--metrics-secure, the default) checks a scraper may get /metrics; as tokenreviews",
}

// checkWebhookRBAC compares what manifests/webhook grants ServiceAccount
// karpx-system/karpx-webhook with what the API server's audit log shows it
// used since the suite started (the suite's webhook and the self-signed
// one of TestSelfSignedRotationUnderServiceAccount, which together use
// every path): a grant never used and not allowlisted, or a Forbidden
// answer, fails t.
func checkWebhookRBAC(t *testing.T) {
	t.Helper()
	objs, err := cluster.LoadRBAC(filepath.Join(suite.root, "manifests", "webhook"))
	if err != nil {
		t.Fatal(err)
	}
	used, forbidden, err := cluster.UsedPermissions(suite.auditLog, webhookUser)
	if err != nil {
		t.Fatal(err)
	}
	granted := cluster.GrantedPermissions(objs, testNamespace, "karpx-webhook")
	cluster.CheckLeastPrivilege(t, "manifests/webhook", granted, used, forbidden, webhookRBACAllowlist)
}

// rotationRuns counts runs of TestSelfSignedRotationUnderServiceAccount in
// this process.
var rotationRuns atomic.Int32

// eventuallyFor polls f every 100 ms for up to d.
func eventuallyFor(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verifyServing checks that certPEM chains to caPEM and is valid for
// localhost for longer than the rotator's lookahead.
func verifyServing(caPEM, certPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("ca.crt is not PEM")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("tls.crt is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	if time.Until(cert.NotAfter) < webhook.CertLookahead {
		return fmt.Errorf("serving certificate expires %s, within the lookahead", cert.NotAfter)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"})
	return err
}

// expiringPair returns a self-signed CA valid for d from now and its key
// (PEM), with a serving certificate for localhost signed by it.
func expiringPair(t *testing.T, d time.Duration) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "karpx-webhook-ca", Organization: []string{"karpx"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(d), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(d),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	return enc("CERTIFICATE", caDER), enc("CERTIFICATE", srvDER), enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
}
