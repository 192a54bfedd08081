package throttle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/karpx/karpx/autoscaler/aws/budget/budgetstatus"
	"github.com/karpx/karpx/catalog/awsquota"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/throttle"
)

// sample is a status as the controller serves it.
func sample() budgetstatus.Status {
	return budgetstatus.Status{
		Enabled: true, Fraction: 0.5,
		Categories: []budgetstatus.CategoryStatus{
			{Category: awsquota.Mutating, Size: 25, RefillPerSecond: 2.5, Tokens: 24, AdaptiveFactor: 0.5, Slowdowns: 1,
				Counts: budgetstatus.Counts{Requests: 12, Throttled: 1, Retries: 1}, WaitP99Seconds: 0.4},
			{Category: awsquota.NonMutating, Size: 50, RefillPerSecond: 10, Tokens: 3.25, AdaptiveFactor: 1,
				Counts: budgetstatus.Counts{Requests: 900, Exhausted: 4}, WaitP99Seconds: 2.5},
		},
		Actions: []budgetstatus.ActionStatus{
			{Action: "CreateFleet", Category: awsquota.Mutating, Size: 25, RefillPerSecond: 2.5, Tokens: 24,
				Adaptive: budgetstatus.Adaptive{Factor: 0.5, Size: 12, RefillPerSecond: 1.25, Slowdowns: 1},
				Counts:   budgetstatus.Counts{Requests: 12, Throttled: 1, Retries: 1}, WaitP50Seconds: 0.1, WaitP99Seconds: 0.4},
			{Action: "DescribeSpotPriceHistory", Category: awsquota.NonMutating, Size: 50, RefillPerSecond: 10, Tokens: 3.25,
				Counts: budgetstatus.Counts{Requests: 900, Exhausted: 4}, WaitP99Seconds: 2.5},
		},
		Totals: budgetstatus.Counts{Requests: 912, Throttled: 1, Retries: 1, Exhausted: 4},
	}
}

const proxyPath = "/api/v1/namespaces/karpx/services/karpx-controller:status/proxy/throttle"

// apiServer stands in for the API server: it serves the status at the
// proxy path of the default Service, and answers for other Services as the
// API server does for a missing one.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == proxyPath:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(sample())
		case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/karpx/services/other:"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"services \"other\" not found","reason":"NotFound","details":{"name":"other","kind":"services"},"code":404}`))
		case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/karpx/services/karpx-controller:9999/"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"no endpoints available for service \"karpx-controller\"","reason":"ServiceUnavailable","code":503}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func run(t *testing.T, srv *httptest.Server, args ...string) (string, error) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := throttle.NewCmd(&cluster.StaticFactory{DiscoveryValue: dc}, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	// kubectl's -n, as the root command binds it.
	root := &cobra.Command{Use: "karpx"}
	root.PersistentFlags().StringP("namespace", "n", "", "namespace")
	root.AddCommand(cmd)
	root.SetArgs(append([]string{"throttle"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SilenceUsage, root.SilenceErrors = true, true
	err = root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestTableThroughServiceProxy(t *testing.T) {
	out, err := run(t, apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"EC2 API budget: 50% of AWS's documented request rates, 912 requests, 1 throttled, 0 retry-quota errors.",
		"CATEGORY       BUCKET   REFILL/S   TOKENS   RATE                REQUESTS   THROTTLED   RETRIES   WAIT-P99",
		"mutating       25       2.5        24.0     50% (1 slow-down)   12         1           1         400ms",
		"non-mutating   50       10         3.2      100%                900        0           0         2.5s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "CreateFleet") {
		t.Errorf("default output shows actions:\n%s", out)
	}
}

func TestWideShowsActions(t *testing.T) {
	out, err := run(t, apiServer(t), "-o", "wide", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "EC2 API budget") || strings.Contains(out, "CATEGORY") {
		t.Errorf("--no-headers printed headers:\n%s", out)
	}
	for _, want := range []string{"CreateFleet                mutating", "DescribeSpotPriceHistory   non-mutating"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestJSONRoundTripsBudgetStatus(t *testing.T) {
	out, err := run(t, apiServer(t), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got budgetstatus.Status
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var meta struct{ APIVersion, Kind string }
	if err := json.Unmarshal([]byte(out), &meta); err != nil || meta.APIVersion != "karpx.io/v1alpha1" || meta.Kind != "EC2APIBudget" {
		t.Errorf("-o json names %+v (%v), want karpx.io/v1alpha1 EC2APIBudget", meta, err)
	}
	if want := sample(); !reflect.DeepEqual(got, want) {
		t.Errorf("the plugin's mirror of budgetstatus.Status lost fields:\ngot  %+v\nwant %+v", got, want)
	}
	out, err = run(t, apiServer(t), "-o", "yaml")
	if err != nil || !strings.Contains(out, "fraction: 0.5") || !strings.Contains(out, "action: CreateFleet") {
		t.Errorf("yaml: %v\n%s", err, out)
	}
}

func TestServiceNotFound(t *testing.T) {
	_, err := run(t, apiServer(t), "--service", "other")
	if err == nil || !strings.Contains(err.Error(), `service "other" not found in namespace "karpx"`) ||
		!strings.Contains(err.Error(), "manifests/controller/service.yaml") || !strings.Contains(err.Error(), "--endpoint") {
		t.Errorf("got %v", err)
	}
	_, err = run(t, apiServer(t), "-n", "elsewhere")
	if err == nil || !strings.Contains(err.Error(), "does not serve /throttle") {
		t.Errorf("namespace without the path: %v", err)
	}
	_, err = run(t, apiServer(t), "--port", "9999")
	if err == nil || !strings.Contains(err.Error(), "no ready endpoint") {
		t.Errorf("no endpoints: %v", err)
	}
}

func TestEndpoint(t *testing.T) {
	controller := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/throttle" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(sample())
	}))
	defer controller.Close()
	out, err := run(t, apiServer(t), "--endpoint", controller.URL)
	if err != nil || !strings.Contains(out, "non-mutating") {
		t.Errorf("--endpoint: %v\n%s", err, out)
	}
	_, err = run(t, apiServer(t), "--endpoint", controller.URL+"/metrics")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("wrong path: %v", err)
	}
	if _, err := run(t, apiServer(t), "--endpoint", "127.0.0.1:8080"); err == nil || !strings.Contains(err.Error(), "invalid --endpoint") {
		t.Errorf("bad URL: %v", err)
	}
	if _, err := run(t, apiServer(t), "-o", "table"); err == nil || !strings.Contains(err.Error(), "allowed formats") {
		t.Errorf("bad -o: %v", err)
	}
	// The budget is no Kubernetes resource: -o name is refused as kubectl
	// refuses a format it cannot print.
	_, err = run(t, apiServer(t), "-o", "name")
	if want := `unable to match a printer suitable for the output format "name", allowed formats are: json,wide,yaml`; err == nil || err.Error() != want {
		t.Errorf("-o name: %v, want %q", err, want)
	}
}
