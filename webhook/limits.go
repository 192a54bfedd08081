package webhook

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Defaults of RequestLimits. The API server waits timeoutSeconds (3 s in
// manifests/webhook, at most 30 s: the admissionregistration.k8s.io/v1
// reference) for an answer, so a request still being read or written after
// 5 s has no caller left but a slow or hostile client. 128 requests at
// once is over 20 times what the 2,000 reviews per second of
// `make bench-webhook` keep in flight (about 1 ms each).
const (
	DefaultRequestReadTimeout  = 5 * time.Second
	DefaultRequestWriteTimeout = 5 * time.Second
	DefaultMaxInFlight         = 128
)

// RequestLimits bound each admission request the webhook serves, beyond
// controller-runtime's server, which sets only a header timeout (32 s) and
// an idle timeout: without them a client on the pod network could hold a
// connection open by sending its body slowly, or tie up the process with
// requests in bulk.
type RequestLimits struct {
	// ReadTimeout bounds reading a request's body, from the moment its
	// handler starts (after the headers). Zero means
	// DefaultRequestReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds handling the request and writing its response.
	// Zero means DefaultRequestWriteTimeout.
	WriteTimeout time.Duration
	// MaxInFlight bounds the requests handled at once, across every path;
	// one past it is answered 429 Too Many Requests at once (the API server
	// then applies the webhook's failurePolicy) and counted in
	// karpx_webhook_rejected_requests_total. Zero means DefaultMaxInFlight.
	MaxInFlight int
}

// rejectedRequests counts requests refused before any handler ran, by
// reason.
var rejectedRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "karpx_webhook_rejected_requests_total",
	Help: "Requests the karpx webhook refused before handling them, by reason (overloaded: more than its in-flight bound at once).",
}, []string{"reason"})

func init() { metrics.Registry.MustRegister(rejectedRequests) }

// Server returns srv with every handler registered through it bounded by
// l: read and write deadlines per request and one in-flight bound shared
// by all its paths.
func (l RequestLimits) Server(srv crwebhook.Server) crwebhook.Server {
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultRequestReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultRequestWriteTimeout
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	return limitedServer{Server: srv, limits: l, slots: make(chan struct{}, l.MaxInFlight)}
}

type limitedServer struct {
	crwebhook.Server
	limits RequestLimits
	slots  chan struct{}
}

// Register implements crwebhook.Server.
func (s limitedServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			rejectedRequests.WithLabelValues("overloaded").Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, "karpx webhook overloaded: too many requests at once", http.StatusTooManyRequests)
			return
		}
		now := time.Now()
		rc := http.NewResponseController(w)
		// Errors mean the connection cannot take deadlines (not the case
		// for net/http's TCP and TLS connections); the request is served
		// without them rather than refused.
		_ = rc.SetReadDeadline(now.Add(s.limits.ReadTimeout))
		_ = rc.SetWriteDeadline(now.Add(s.limits.WriteTimeout))
		hook.ServeHTTP(w, r)
	}))
}
