package webhook

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DefaultShutdownDelay is how long a terminating webhook replica keeps
// serving after SIGTERM before it stops its server (--shutdown-delay): 5
// seconds, well inside Kubernetes' default terminationGracePeriodSeconds
// of 30, and longer than endpoint propagation to the API server usually
// takes.
const DefaultShutdownDelay = 5 * time.Second

// Drain is a replica's shutdown state. Once draining, every admission
// response carries "Connection: close", so the API server stops reusing
// its keep-alive connections to this replica and opens new ones to the
// Service, and /readyz fails. Without it, the HTTP server's shutdown
// closes idle keep-alive connections that the API server may be writing
// the next AdmissionReview to, and that review fails ("broken pipe"); Go's
// HTTP client does not retry a POST whose body was partly written.
type Drain struct{ draining atomic.Bool }

// Draining reports whether SIGTERM was received.
func (d *Drain) Draining() bool { return d.draining.Load() }

// ReadyzCheck fails while draining.
func (d *Drain) ReadyzCheck(*http.Request) error {
	if d.Draining() {
		return errors.New("shutting down")
	}
	return nil
}

// Server returns srv with every handler registered through it answering
// "Connection: close" while d is draining.
func (d *Drain) Server(srv crwebhook.Server) crwebhook.Server { return drainingServer{srv, d} }

type drainingServer struct {
	crwebhook.Server
	d *Drain
}

// Register implements crwebhook.Server.
func (s drainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.d.Draining() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// SignalContext returns a context cancelled delay after the first SIGTERM
// or SIGINT; d drains from the signal on. A second signal exits at once
// with code 1.
func (d *Drain) SignalContext(delay time.Duration, log logr.Logger) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		d.draining.Store(true)
		log.Info("draining: answering with Connection: close before shutting down", "signal", sig.String(), "shutdownDelay", delay.String())
		select {
		case <-time.After(delay):
		case <-sigs:
			os.Exit(1)
		}
		cancel()
		<-sigs
		os.Exit(1)
	}()
	return ctx
}
