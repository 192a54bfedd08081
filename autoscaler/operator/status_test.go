package operator

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// newTestManager is a manager with every server of its own off, against an
// API server that is never contacted (nothing watches).
func newTestManager(t *testing.T) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(&rest.Config{Host: "http://127.0.0.1:1"}, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// The status server answers its paths over plain HTTP while the manager
// runs, and is closed once the manager has stopped.
func TestStatusServerStartsAndStopsWithTheManager(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	mgr := newTestManager(t)
	handlers := map[string]http.Handler{"/throttle": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"kind":"budget"}`)
	})}
	if err := addStatusServer(mgr, addr, handlers); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	// The port is bound before Start: the request waits for Serve.
	resp, err := http.Get("http://" + addr + "/throttle")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `{"kind":"budget"}` {
		t.Errorf("/throttle: %d %q", resp.StatusCode, body)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("/metrics on the status port: %d, want 404 (metrics have their own server)", resp.StatusCode)
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("manager stopped with %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the manager stopped", addr)
	}
}

// A taken address fails at construction with the flag's name; "0" adds
// nothing.
func TestStatusServerAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := map[string]http.Handler{"/throttle": http.NotFoundHandler()}
	err = addStatusServer(newTestManager(t), l.Addr().String(), h)
	if err == nil || !strings.Contains(err.Error(), "--status-bind-address") {
		t.Errorf("taken address: %v, want an error naming --status-bind-address", err)
	}
	if err := addStatusServer(newTestManager(t), "0", h); err != nil {
		t.Errorf("disabled: %v", err)
	}
}

// Validate refuses a status address equal to the metrics or probe one,
// and accepts the defaults and disabled addresses.
func TestValidateStatusAddress(t *testing.T) {
	for _, tc := range []struct {
		status, metrics, probe string
		wantErr                string
	}{
		{":8082", ":8080", ":8081", ""},
		{":8080", ":8080", ":8081", "--metrics-bind-address"},
		{":8081", ":8080", ":8081", "--health-probe-bind-address"},
		{"0", "0", "0", ""},
		{":8080", "0", ":8081", ""},
	} {
		o := DefaultOptions()
		o.ClusterName = "c"
		o.StatusBindAddress, o.MetricsBindAddress, o.HealthProbeBindAddress = tc.status, tc.metrics, tc.probe
		err := o.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--status-bind-address")):
			t.Errorf("%+v: %v, want an error naming --status-bind-address and %s", tc, err, tc.wantErr)
		}
	}
}

// Metrics are authenticated by default, and the status endpoints have
// their own port.
func TestMetricsSecureAndStatusDefaults(t *testing.T) {
	o := DefaultOptions()
	if !o.MetricsSecure || o.StatusBindAddress != ":8082" {
		t.Errorf("defaults: MetricsSecure %v, StatusBindAddress %q; want true, :8082", o.MetricsSecure, o.StatusBindAddress)
	}
	m := metricsOptions(o)
	if !m.SecureServing || m.FilterProvider == nil || len(m.ExtraHandlers) != 0 {
		t.Errorf("metrics options %+v: want HTTPS behind the filter, /metrics only", m)
	}
	t.Setenv("METRICS_SECURE", "false")
	if DefaultOptions().MetricsSecure {
		t.Error("METRICS_SECURE=false left metrics secure")
	}
}
