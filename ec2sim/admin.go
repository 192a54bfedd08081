package ec2sim

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Admin endpoints (JSON unless noted):
//
//	GET    /_sim/healthz    "ok" (text)
//	GET    /_sim/counts     {"<Action>": {"requests": n, "throttled": n, "errors": n}}
//	DELETE /_sim/counts     resets the counters of /_sim/counts (not /metrics)
//	GET    /_sim/instances  [Instance...], launch order
//	GET    /_sim/faults     FaultSet
//	POST   /_sim/faults     FaultSet to append
//	PUT    /_sim/faults     FaultSet to replace the current one
//	DELETE /_sim/faults     clears every fault
//	GET    /_sim/throttle   ThrottleConfig
//	PUT    /_sim/throttle   ThrottleConfig to apply (buckets refill)
//	GET    /metrics         Prometheus text format, metrics prefixed ec2sim_
//	/_sim/hold, /_sim/calls  held answers and recorded callers (hold.go)
//	/_sim/sqs, /_sim/interrupt  queues and interruption events (interruptions.go)
func (s *Simulator) registerAdmin(mux *http.ServeMux) {
	s.registerHoldAdmin(mux)
	s.registerSQSAdmin(mux)
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/_sim/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/_sim/counts", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, s.Stats())
		case http.MethodDelete:
			s.metrics.resetStats()
			w.WriteHeader(http.StatusNoContent)
		default:
			methodNotAllowed(w)
		}
	})
	mux.HandleFunc("/_sim/instances", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			methodNotAllowed(w)
			return
		}
		writeJSON(w, http.StatusOK, s.Instances())
	})
	mux.HandleFunc("/_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodPost, http.MethodPut:
			var fs FaultSet
			if !readJSON(w, r, &fs) {
				return
			}
			var err error
			if r.Method == http.MethodPut {
				err = s.faults.Set(fs)
			} else if err = s.faults.Add(fs.Rules...); err == nil {
				err = s.faults.AddCapacity(fs.Capacity...)
			}
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			s.log.Info("Faults changed", "method", r.Method, "rules", len(fs.Rules), "capacity", len(fs.Capacity))
		case http.MethodDelete:
			s.faults.Clear()
			s.log.Info("Faults cleared")
		default:
			methodNotAllowed(w)
			return
		}
		writeJSON(w, http.StatusOK, s.faults.Get())
	})
	mux.HandleFunc("/_sim/throttle", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodPut:
			var tc ThrottleConfig
			if !readJSON(w, r, &tc) {
				return
			}
			if err := tc.validateNeighbours(); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			s.SetThrottle(tc)
			s.log.Info("Throttling changed", "disabled", tc.Disabled, "neighbours", tc.Neighbours)
		default:
			methodNotAllowed(w)
			return
		}
		writeJSON(w, http.StatusOK, s.throttl.config())
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeFound answers 200 with v as JSON, or, when err is not nil (the
// queue or object the path names does not exist), 404 with
// {"error": err's text}.
func writeFound(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return false
	}
	return true
}

func methodNotAllowed(w http.ResponseWriter) {
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
}

// instanceFaultAdmin serves a per-instance fault hook: POST decodes a fault
// F (JSON) and applies it with set, 204 on success, 404 when set returns
// ErrUnknownInstance, 400 for any other error (the message as
// {"error": ...}); DELETE ends the faults of the instances named by
// ?instanceId=i-... (every instance when none is named) with clear, 204.
func instanceFaultAdmin[F any](set func(F) error, clear func(ids ...string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			var f F
			if !readJSON(w, r, &f) {
				return
			}
			if err := set(f); err != nil {
				status := http.StatusBadRequest
				if errors.Is(err, ErrUnknownInstance) {
					status = http.StatusNotFound
				}
				writeJSON(w, status, map[string]string{"error": err.Error()})
				return
			}
		case http.MethodDelete:
			clear(r.URL.Query()["instanceId"]...)
		default:
			methodNotAllowed(w)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
