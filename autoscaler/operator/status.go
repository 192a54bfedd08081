package operator

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Status server timeouts. The answers are small JSON documents built from
// memory (a few KB for /throttle and /hydration, about 1 KB per learned
// instance type for /capacity), so a client that needs more than these is
// stuck or hostile; the bounds keep such a client from holding a
// connection and its goroutine. The 30-s shutdown bound is the manager's
// default graceful shutdown timeout (controller-runtime v0.23
// pkg/manager/internal.go defaultGracefulShutdownPeriod).
const (
	statusReadHeaderTimeout = 5 * time.Second
	statusReadTimeout       = 10 * time.Second
	statusWriteTimeout      = 30 * time.Second
	statusIdleTimeout       = 2 * time.Minute
	statusShutdownTimeout   = 30 * time.Second
)

// addStatusServer serves handlers (path → handler: /throttle, /hydration,
// /capacity) on addr over plain HTTP, apart from the metrics server, as a
// manager Runnable that starts with the manager on every replica (no
// leader election: a standby's status is its own, as its metrics are) and
// shuts down gracefully when the manager stops. addr "0" or "" disables
// it. The port is bound here, so a taken or malformed address fails New
// with an error naming --status-bind-address, not the manager's Start.
//
// Unauthenticated on purpose: `kubectl karpx` reaches it through the API
// server's service proxy, which authorises the user (RBAC get on
// services/proxy, Role karpx-throttle-reader) but passes no token on; the
// endpoints expose counters and learned capacity, no secret
// (docs/security.md, T10).
func addStatusServer(mgr manager.Manager, addr string, handlers map[string]http.Handler) error {
	if addr == "" || addr == "0" || len(handlers) == 0 {
		return nil
	}
	mux := http.NewServeMux()
	paths := make([]string, 0, len(handlers))
	for path, h := range handlers {
		mux.Handle(path, h)
		paths = append(paths, path)
	}
	sort.Strings(paths)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--status-bind-address %q (STATUS_BIND_ADDRESS): %w; choose a free host:port or 0 to turn the status endpoints off", addr, err)
	}
	shutdown := statusShutdownTimeout
	srv := &manager.Server{
		Name:     "status " + fmt.Sprint(paths),
		Listener: ln,
		Server: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: statusReadHeaderTimeout,
			ReadTimeout:       statusReadTimeout,
			WriteTimeout:      statusWriteTimeout,
			IdleTimeout:       statusIdleTimeout,
			MaxHeaderBytes:    1 << 16,
		},
		ShutdownTimeout: &shutdown,
	}
	if err := mgr.Add(srv); err != nil {
		ln.Close()
		return fmt.Errorf("adding the status server: %w", err)
	}
	return nil
}

// validateAddresses refuses a status address equal to the metrics or the
// health probe address (both servers would try to bind it). Disabled
// addresses ("0", "") never clash.
func (o *Options) validateAddresses() error {
	off := func(a string) bool { return a == "" || a == "0" }
	if off(o.StatusBindAddress) {
		return nil
	}
	for _, other := range []struct{ flag, addr string }{
		{"--metrics-bind-address", o.MetricsBindAddress},
		{"--health-probe-bind-address", o.HealthProbeBindAddress},
	} {
		if !off(other.addr) && other.addr == o.StatusBindAddress {
			return fmt.Errorf("--status-bind-address %q equals %s: give the status endpoints a port of their own (default :8082), or 0 to turn them off", o.StatusBindAddress, other.flag)
		}
	}
	return nil
}
