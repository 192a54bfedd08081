package webhook_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpx/karpx/test/cluster"
)

// TestWebhookMetricsNeedAuthentication runs the karpx-webhook binary with
// its default flags (--metrics-secure is on by default) as ServiceAccount
// karpx-system/karpx-webhook, with manifests/webhook's RBAC (its ClusterRole
// may create TokenReviews and SubjectAccessReviews) and ClusterRole
// karpx-metrics-reader (get on /metrics, as manifests/controller has it)
// bound to a scraper ServiceAccount (test/helm's TestChartMetricsSecure
// checks the chart renders exactly these rules), and scrapes it over
// HTTPS: no token is refused (401), another ServiceAccount's token is
// forbidden (403), the scraper's token gets the webhook's metrics.
// Control: the same binary with --metrics-secure=false serves /metrics
// over plain HTTP to anyone.
func TestWebhookMetricsNeedAuthentication(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	admin := suite.client
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "karpx-metrics-reader"}, Rules: []rbacv1.PolicyRule{
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "karpx-metrics-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "karpx-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "metrics-scraper", Namespace: testNamespace}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "metrics-scraper", Namespace: testNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "metrics-outsider", Namespace: testNamespace}},
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	token := func(sa string) string {
		t.Helper()
		cfg, err := cluster.ServiceAccountConfig(ctx, suite.cfg, testNamespace, sa, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.BearerToken
	}
	scraper, outsider := token("metrics-scraper"), token("metrics-outsider")

	scrape := func(url, bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		// The secure server's certificate is self-signed, generated at start.
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed by design
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// expect polls until url answers bearer's scrape with want (RBAC and the
	// server's start settle within seconds) and returns the body.
	expect := func(what, url, bearer string, want int) string {
		t.Helper()
		var body string
		eventuallyFor(t, 30*time.Second, what, func() error {
			code, b, err := scrape(url, bearer)
			if err != nil {
				return err
			}
			if body = b; code != want {
				return fmt.Errorf("status %d, want %d: %.200s", code, want, b)
			}
			return nil
		})
		return body
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	startWebhookProcess(t, "--metrics-bind-address", addr) // secure by default
	secure := "https://" + addr + "/metrics"
	body := expect("the scraper's token", secure, scraper, http.StatusOK)
	if !strings.Contains(body, "controller_runtime_webhook_requests_total") && !strings.Contains(body, "karpx_webhook") {
		t.Errorf("the authorised scrape is not the webhook's metrics: %.300s", body)
	}
	expect("no token", secure, "", http.StatusUnauthorized)
	expect("a token without karpx-metrics-reader", secure, outsider, http.StatusForbidden)
	if code, body, err := scrape("http://"+addr+"/metrics", ""); err == nil && code == http.StatusOK {
		t.Errorf("the secure metrics port served plain HTTP: %.200s", body)
	}

	// Control: the plain server answers anyone.
	plainAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	startWebhookProcess(t, "--metrics-bind-address", plainAddr, "--metrics-secure=false")
	expect("control: plain metrics without a token", "http://"+plainAddr+"/metrics", "", http.StatusOK)
}
