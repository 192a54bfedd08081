package ec2sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/karpx/karpx/catalog/awsquota"
)

// Simulator is an in-memory EC2 (and SSM Parameter Store) endpoint. Create
// it with New, serve Handler (or call Start), and point aws-sdk-go-v2 clients
// at it with BaseEndpoint. It is safe for concurrent use.
type Simulator struct {
	cfg     Config
	log     logr.Logger
	clock   clock.WithTicker
	throttl *throttler
	idem    *idempotency
	holds   *holds // hold.go
	faults  *Faults
	metrics *metrics

	mu              sync.Mutex
	ids             *idGen
	instances       map[string]*instance
	order           []string // instance ids in launch order
	launchTemplates map[string]*launchTemplate
	ltByName        map[string]string
	images          map[string]*Image
	imageOrder      []string
	subnets         []*subnetState
	securityGroups  []SecurityGroup
	// imageAllocatable are SetImageAllocatable's rules (image_allocatable.go).
	imageAllocatable []ImageAllocatable
	// reservations are the capacity reservations by id, reservationOrder
	// their ids in the order they were added (capacityreservations.go).
	reservations     map[string]*capacityReservation
	reservationOrder []string
	// blockLead is SetCapacityBlockTerminationLead's lead; 0 for
	// CapacityBlockTerminationLead.
	blockLead time.Duration

	// sqs holds the SQS queues (sqs.go); events the interruption events
	// (events.go).
	sqs    *sqsState
	events *eventState

	// iam is the simulated IAM account (iam.go), created on first use.
	iam     *iamState
	iamOnce sync.Once

	stopped chan struct{} // closed when a Started server has shut down
}

// New returns a Simulator for cfg with every unset field defaulted (see
// Config). It returns an error when a zone is not in the region, a subnet
// CIDR does not parse or a subnet is in an unknown zone.
func New(cfg Config) (*Simulator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Simulator{
		cfg:             cfg,
		log:             cfg.Logger.WithName("ec2sim"),
		clock:           cfg.Clock,
		throttl:         newThrottler(cfg.Throttle),
		idem:            newIdempotency(),
		holds:           newHolds(),
		faults:          newFaults(cfg.Seed),
		ids:             newIDGen(cfg.Seed),
		instances:       map[string]*instance{},
		launchTemplates: map[string]*launchTemplate{},
		ltByName:        map[string]string{},
		images:          map[string]*Image{},
		stopped:         make(chan struct{}),
	}
	for _, sn := range cfg.Subnets {
		s.subnets = append(s.subnets, newSubnetState(sn))
	}
	s.securityGroups = cfg.SecurityGroups
	s.seedImages()
	for _, img := range cfg.Images {
		s.addImage(img)
	}
	s.sqs = newSQSState(&cfg)
	s.events = newEventState(&cfg)
	s.faults.clock = cfg.Clock
	s.metrics = newMetrics(s)
	s.metrics.registry.MustRegister(newSQSCollector(s)) // sqs.go
	return s, nil
}

// Faults returns the fault injector.
func (s *Simulator) Faults() *Faults { return s.faults }

// Config returns the effective configuration, defaults filled in.
func (s *Simulator) Config() Config { return s.cfg }

// SetThrottle replaces the throttling configuration and refills every bucket.
func (s *Simulator) SetThrottle(tc ThrottleConfig) { s.throttl.set(tc) }

// Counts returns the number of calls per action, every answer included
// (successes, errors, throttled). Calls of unknown actions count as "Unknown".
func (s *Simulator) Counts() map[string]int64 { return s.metrics.counts() }

// Stats returns the per-action counters: requests, throttled answers and
// error answers (throttled ones included).
func (s *Simulator) Stats() map[string]ActionStats { return s.metrics.stats() }

// Instances returns a snapshot of every instance still visible (terminated
// ones for Config.TerminatedRetention), in launch order.
func (s *Simulator) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.gcLocked(now)
	out := make([]Instance, 0, len(s.order))
	for _, id := range s.order {
		in := s.instances[id]
		snap := in.snapshot(now, &s.cfg)
		snap.CapacityReservationID = s.instanceReservationLocked(in, now)
		out = append(out, snap)
	}
	return out
}

// Handler returns the HTTP handler: the EC2 Query API, the IAM Query API
// (instance profiles, iam.go), the SSM JSON API and the SQS JSON API
// (action_sqs.go) on "/", the admin endpoints below "/_sim/" and Prometheus metrics on
// "/metrics".
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	s.registerAdmin(mux)
	s.registerIAMAdmin(mux)
	s.registerStatusAdmin(mux)        // action_instancestatus.go
	s.registerNodeConditionAdmin(mux) // nodeconditions.go
	s.registerCapacityReservationAdmin(mux)
	mux.HandleFunc("/", s.serveAPI)
	return mux
}

// Start listens on addr (e.g. "127.0.0.1:0"), serves Handler and runs the
// kubelet emulation until ctx is done, then shuts the server down
// gracefully. It returns the endpoint URL ("http://127.0.0.1:PORT") once
// the listener is open, or the listen error.
func (s *Simulator) Start(ctx context.Context, addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("ec2sim: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "Serving stopped")
		}
	}()
	go s.Run(ctx)
	go func() {
		defer close(s.stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			s.log.Error(err, "Graceful shutdown incomplete")
		}
		s.log.Info("Stopped serving", "endpoint", "http://"+ln.Addr().String())
	}()
	endpoint := "http://" + ln.Addr().String()
	s.log.Info("Serving EC2 simulator", "endpoint", endpoint, "region", s.cfg.Region, "zones", s.cfg.Zones,
		"throttling", !s.cfg.Throttle.Disabled, "kube", s.cfg.Kube != nil)
	return endpoint, nil
}

// Stopped returns a channel closed once the server of Start has shut down
// after its context was done (in-flight calls answered, at most 5 seconds).
// It is never closed when Start was not called, or failed.
func (s *Simulator) Stopped() <-chan struct{} { return s.stopped }

// Run advances the kubelet emulation every Config.ReconcileInterval until
// ctx is done. Start calls it; call it yourself when you serve Handler
// another way.
func (s *Simulator) Run(ctx context.Context) {
	t := s.clock.NewTicker(s.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			// Failed steps are logged by the pass and retried on the next.
			_ = s.Reconcile(ctx)
		}
	}
}

// request is one decoded API call.
type request struct {
	ctx  context.Context
	spec *actionSpec
	p    params    // EC2 Query parameters
	json []byte    // SSM and SQS JSON body
	now  time.Time // arrival time (Config.Clock)
	// endpoint is the scheme and host the caller used (SQS queue URLs).
	endpoint string
}

// maxBody bounds request bodies (EC2 accepts up to about 1 MiB of parameters
// besides user data, which a launch template caps at 16 KiB base64).
const maxBody = 4 << 20

func (s *Simulator) serveAPI(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if isEKSRequest(r) {
		s.serveEKS(w, r, reqID) // eks.go
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		if strings.HasPrefix(target, "AmazonSQS.") {
			s.serveSQS(w, r, reqID, target) // action_sqs.go
			return
		}
		s.serveSSM(w, r, reqID, target)
		return
	}
	if err := r.ParseForm(); err != nil {
		e := errMalformedQuery(err.Error())
		s.metrics.observe(serviceEC2, "Unknown", 0, e, false)
		writeXMLError(w, reqID, e)
		return
	}
	if r.Form.Get("Version") == iamAPIVersion {
		s.serveIAM(w, r, reqID) // iam.go
		return
	}
	s.responseDelay()
	p := newParams(r.Form)
	name := p.str("Action")
	spec := lookupAction(name)
	var apiErr *APIError
	switch {
	case name == "":
		apiErr = newError(CodeMissingAction, "The request must contain the parameter Action")
	case spec == nil || spec.service != serviceEC2:
		apiErr = newError(CodeInvalidAction, "The action %s is not valid for this web service.", name)
	case p.str("Version") == "":
		apiErr = errMissingParameter("Version")
	default:
		apiErr = checkQuery(r.Form) // strict.go
	}
	if apiErr != nil {
		counted := "Unknown"
		if spec != nil && spec.service == serviceEC2 {
			counted = spec.name
		}
		s.metrics.observe(serviceEC2, counted, 0, apiErr, false)
		writeXMLError(w, reqID, apiErr)
		return
	}
	req := &request{ctx: r.Context(), spec: spec, p: p}
	body, apiErr := s.holds.serve(r, req, func() (any, *APIError) { return s.dispatch(req) }) // hold.go
	if apiErr != nil {
		writeXMLError(w, reqID, apiErr)
		return
	}
	if err := writeXML(w, spec.name, reqID, body); err != nil {
		s.log.Error(err, "Writing answer", "action", spec.name)
	}
}

// dispatch runs the common pipeline of every action: throttling, injected
// latency and errors, DryRun, the handler, and the counters.
func (s *Simulator) dispatch(req *request) (body any, apiErr *APIError) {
	spec := req.spec
	start := time.Now()
	req.now = s.clock.Now()
	throttled := false
	defer func() { s.metrics.observe(spec.service, spec.name, time.Since(start), apiErr, throttled) }()

	charge := spec.charge()
	bare := charge.Unfiltered && isBare(req.p)
	cat := charge.Category
	if bare {
		cat = awsquota.UnfilteredNonMutating
	}
	if !s.throttl.allow(spec.name, cat, bare, req.now) {
		throttled = true
		switch spec.service {
		case serviceSSM:
			return nil, newError("ThrottlingException", "Rate exceeded")
		case serviceSQS:
			return nil, newError("RequestThrottled", "Request is throttled.")
		case serviceEKS, servicePricing:
			return nil, &APIError{Code: "ThrottlingException", Message: "Rate exceeded", HTTPStatus: http.StatusBadRequest}
		}
		return nil, newError(CodeRequestLimitExceeded, "Request limit exceeded.")
	}
	// Latency is wall-clock time even with a fake Config.Clock: it delays
	// the HTTP answer, it does not advance the simulated world.
	latency, fault := s.faults.evaluate(spec.name)
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-req.ctx.Done():
			t.Stop()
			return nil, newError(CodeInternalError, "request canceled")
		case <-t.C:
		}
	}
	if fault != nil {
		s.metrics.faultsInjected.WithLabelValues(spec.name, fault.Code).Inc()
		s.log.V(1).Info("Injected fault", "action", spec.name, "code", fault.Code)
		return nil, fault
	}
	if spec.service == serviceEC2 {
		if dry, err := req.p.boolean("DryRun"); err != nil {
			return nil, err
		} else if dry {
			return nil, newError(CodeDryRunOperation, "Request would have succeeded, but DryRun flag is set.")
		}
	}
	out, err := s.idem.do(req, func() (any, error) { return spec.handle(s, req) }) // idempotency.go
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) {
			return nil, ae
		}
		s.log.Error(err, "Action failed", "action", spec.name)
		return nil, newError(CodeInternalError, "An internal error has occurred")
	}
	return out, nil
}

// responseDelay waits Config.ResponseDelay (wall clock) after the request
// body has been read.
func (s *Simulator) responseDelay() {
	if s.cfg.ResponseDelay > 0 {
		time.Sleep(s.cfg.ResponseDelay)
	}
}

// WrapTransport returns a RoundTripper for aws-sdk-go-v2 clients of the
// simulator that hides io.WriterTo of request bodies. smithy-go wraps request
// bodies in a reader whose WriteTo returns io.EOF once the SDK has closed it
// after receiving the answer; net/http's writer, still probing the body for
// bytes beyond Content-Length, then treats the connection as broken and
// closes it under the response being read. Only very fast servers (loopback)
// hit this; Config.ResponseDelay makes it unlikely, this makes it
// impossible. next nil means http.DefaultTransport.
func WrapTransport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil && r.Body != http.NoBody {
			r = r.Clone(r.Context())
			r.Body = readOnlyBody{r.Body}
		}
		return next.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// readOnlyBody exposes only Read and Close of a request body.
type readOnlyBody struct{ rc io.ReadCloser }

func (b readOnlyBody) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b readOnlyBody) Close() error               { return b.rc.Close() }

// json11Targets maps the X-Amz-Target prefix of each AWS JSON 1.1 service
// the simulator speaks to the service.
var json11Targets = map[string]service{"AmazonSSM": serviceSSM, "AWSPriceListService": servicePricing}

// serveSSM answers AWS JSON 1.1 calls: SSM (X-Amz-Target:
// AmazonSSM.<Action>) and the Price List API
// (AWSPriceListService.<Action>, pricing.go).
func (s *Simulator) serveSSM(w http.ResponseWriter, r *http.Request, reqID, target string) {
	prefix, name, _ := strings.Cut(target, ".")
	svc, ok := json11Targets[prefix]
	spec := lookupAction(name)
	if !ok || spec == nil || spec.service != svc {
		e := newError("UnknownOperationException", "Unknown operation %s", target)
		if !ok {
			svc = serviceSSM
		}
		s.metrics.observe(svc, "Unknown", 0, e, false)
		writeJSONError(w, reqID, e)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeJSONError(w, reqID, newError("SerializationException", "%v", err))
		return
	}
	s.responseDelay()
	s.serveJSON(w, r, reqID, spec, body, "application/x-amz-json-1.1", writeJSONError)
}

// serveJSON dispatches the JSON-protocol request of spec with body (the
// AWS JSON 1.1 protocol of SSM and SQS, or EKS's REST-JSON) and writes the
// answer: the action's output encoded as JSON with contentType and the
// request id, or its error through writeErr (the protocol's error shape).
func (s *Simulator) serveJSON(w http.ResponseWriter, r *http.Request, reqID string, spec *actionSpec, body []byte, contentType string,
	writeErr func(http.ResponseWriter, string, *APIError)) {
	out, apiErr := s.dispatch(&request{ctx: r.Context(), spec: spec, json: body, p: newParams(nil)})
	if apiErr != nil {
		writeErr(w, reqID, apiErr)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("x-amzn-RequestId", reqID)
	_ = json.NewEncoder(w).Encode(out)
}

// writeJSONError writes the AWS JSON 1.1 error shape the SDK parses: the
// code in X-Amzn-ErrorType and in "__type", the text in "message".
func writeJSONError(w http.ResponseWriter, reqID string, e *APIError) {
	writeErrorHeader(w, "application/x-amz-json-1.1", reqID, e)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.Code, "message": e.Message})
}

// writeErrorHeader writes what the JSON 1.1 and REST-JSON error answers
// share: the content type, the request id, the code in X-Amzn-ErrorType and
// the status (e.HTTPStatus, or the code's default).
func writeErrorHeader(w http.ResponseWriter, contentType, reqID string, e *APIError) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("x-amzn-RequestId", reqID)
	w.Header().Set("X-Amzn-ErrorType", e.Code)
	status := e.HTTPStatus
	if status == 0 {
		status = defaultStatus(e.Code)
	}
	w.WriteHeader(status)
}

// gcLocked sends the pending state-change events, then forgets instances
// terminated more than TerminatedRetention ago whose Node (if any) is gone.
func (s *Simulator) gcLocked(now time.Time) {
	s.publishStateChangesLocked(now) // events.go, before anything is forgotten
	kept := s.order[:0]
	for _, id := range s.order {
		in := s.instances[id]
		if end := in.endedAt(now); !end.IsZero() && now.Sub(end) > s.cfg.ShuttingDownDelay+s.cfg.TerminatedRetention &&
			(in.node.name == "" || in.node.deleted || s.cfg.Kube == nil) {
			delete(s.instances, id)
			continue
		}
		kept = append(kept, id)
	}
	s.order = kept
}

// sortedKeys returns the keys of m in order.
func sortedKeys[K ~string, V any](m map[K]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}
