package webhook

import (
	"net/http"
	"net/http/httptest"
	"testing"

	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// captureServer records the handler registered through it.
type captureServer struct {
	crwebhook.Server
	handlers map[string]http.Handler
}

func (s *captureServer) Register(path string, h http.Handler) { s.handlers[path] = h }

func TestDrainClosesKeepAliveConnectionsAndFailsReadyz(t *testing.T) {
	inner := &captureServer{handlers: map[string]http.Handler{}}
	d := &Drain{}
	d.Server(inner).Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	h := inner.handlers["/validate"]
	if h == nil {
		t.Fatal("the handler was not registered on the wrapped server")
	}
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate", nil))
		return rec
	}
	if got := serve().Header().Get("Connection"); got != "" {
		t.Errorf("before SIGTERM: Connection = %q, want none (keep-alive)", got)
	}
	if err := d.ReadyzCheck(nil); err != nil {
		t.Errorf("before SIGTERM: readyz = %v, want ready", err)
	}
	d.draining.Store(true)
	if got := serve(); got.Header().Get("Connection") != "close" || got.Code != http.StatusOK {
		t.Errorf("draining: Connection = %q, code %d; want close, 200 (still serving)", got.Header().Get("Connection"), got.Code)
	}
	if err := d.ReadyzCheck(nil); err == nil {
		t.Error("draining: readyz passed, want it failing")
	}
}
