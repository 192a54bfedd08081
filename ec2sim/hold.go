package ec2sim

import (
	"net/http"
	"sync"
	"time"
)

// This file holds answers and records callers, for tests that must kill a
// client at an exact point of a call:
//
//   - HoldAnswers(action, n): the next n successful calls of action take
//     effect (CreateFleet has launched, TerminateInstances has moved the
//     instances to shutting-down) and then their HTTP answer waits until
//     ReleaseHeld, the client disconnects or the server stops. Each held
//     call is announced on Held(), so a test knows the call has been
//     executed and its caller has not yet seen the answer: the window in
//     which a controller killed loses the answer of a call that happened.
//   - Calls(action): every CreateFleet, RunInstances and TerminateInstances
//     call with its User-Agent (aws-sdk-go-v2 appends "app/<id>" from
//     AWS_SDK_UA_APP_ID, so two replicas of a controller are told apart as
//     AWS CloudTrail tells them apart), the wall-clock times its handling
//     began and ended and, for CreateFleet, the overrides it asked for (as
//     CloudTrail records a call's request parameters).

// HeldCall is one call whose answer HoldAnswers holds.
type HeldCall struct {
	// Action is the EC2 action, e.g. "CreateFleet".
	Action string `json:"action"`
	// UserAgent is the caller's User-Agent header.
	UserAgent string `json:"userAgent"`
	// InstanceIDs are the instances the call launched (CreateFleet,
	// RunInstances) or was asked to terminate (TerminateInstances).
	InstanceIDs []string `json:"instanceIds"`
}

// Call is one recorded call (see Calls).
type Call struct {
	// Action is the EC2 action.
	Action string `json:"action"`
	// UserAgent is the caller's User-Agent header.
	UserAgent string `json:"userAgent"`
	// Start and End are the wall-clock times the simulator began and
	// finished handling the call (End includes a held answer's wait).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Code is the error code answered, or "" for success.
	Code string `json:"code,omitempty"`
	// Overrides are a CreateFleet call's launch template overrides as the
	// caller sent them, every LaunchTemplateConfigs entry's in order; nil
	// for other actions.
	Overrides []FleetOverride `json:"overrides,omitempty"`
}

// FleetOverride is one CreateFleet launch template override of a recorded
// Call; a field the caller left out is "".
type FleetOverride struct {
	// InstanceType is Overrides.N.InstanceType, e.g. "m5.large".
	InstanceType string `json:"instanceType,omitempty"`
	// SubnetID is Overrides.N.SubnetId.
	SubnetID string `json:"subnetId,omitempty"`
	// AvailabilityZone is Overrides.N.AvailabilityZone.
	AvailabilityZone string `json:"availabilityZone,omitempty"`
}

// fleetOverrides returns the overrides of a CreateFleet request's
// parameters.
func fleetOverrides(p params) []FleetOverride {
	var out []FleetOverride
	for _, cfg := range p.items("LaunchTemplateConfigs") {
		for _, ov := range cfg.items("Overrides") {
			out = append(out, FleetOverride{InstanceType: ov.str("InstanceType"), SubnetID: ov.str("SubnetId"), AvailabilityZone: ov.str("AvailabilityZone")})
		}
	}
	return out
}

// recordedActions are the actions Calls records: the ones that change what
// runs in the account.
var recordedActions = map[string]bool{"CreateFleet": true, "RunInstances": true, "TerminateInstances": true}

// holds is the state of HoldAnswers and Calls.
type holds struct {
	mu      sync.Mutex
	pending map[string]int // action → answers still to hold
	release chan struct{}  // closed by ReleaseHeld
	held    chan HeldCall
	calls   []*Call // the last maxCalls, oldest first
}

// maxCalls bounds the calls Calls remembers, so that a long-running
// simulator (ec2sim, the demo) does not grow without end; older calls are
// forgotten first.
const maxCalls = 10000

func newHolds() *holds {
	return &holds{pending: map[string]int{}, release: make(chan struct{}), held: make(chan HeldCall, 256)}
}

// HoldAnswers holds the answers to the next n successful calls of action
// (see the comment at the top of hold.go); n = 0 stops holding further
// calls without releasing those already held.
func (s *Simulator) HoldAnswers(action string, n int) {
	s.holds.mu.Lock()
	defer s.holds.mu.Unlock()
	s.holds.pending[action] = n
}

// Held announces each call whose answer is being held, once its effect has
// happened. The channel is buffered (256 calls); announcements beyond that
// are dropped.
func (s *Simulator) Held() <-chan HeldCall { return s.holds.held }

// ReleaseHeld answers every held call and stops holding further ones.
func (s *Simulator) ReleaseHeld() {
	s.holds.mu.Lock()
	defer s.holds.mu.Unlock()
	clear(s.holds.pending)
	close(s.holds.release)
	s.holds.release = make(chan struct{})
}

// Calls returns the recorded calls of action (CreateFleet, RunInstances or
// TerminateInstances) in the order they began, of the last 5,000 to
// 10,000 calls of those actions (maxCalls).
func (s *Simulator) Calls(action string) []Call {
	s.holds.mu.Lock()
	defer s.holds.mu.Unlock()
	var out []Call
	for _, c := range s.holds.calls {
		if c.Action == action {
			out = append(out, *c)
		}
	}
	return out
}

// serve wraps the handling of one EC2 call: it records the call and, once
// dispatch has answered without error, holds the answer when asked to.
func (h *holds) serve(r *http.Request, req *request, dispatch func() (any, *APIError)) (any, *APIError) {
	action := req.spec.name
	if !recordedActions[action] {
		return dispatch()
	}
	call := &Call{Action: action, UserAgent: r.UserAgent(), Start: time.Now()}
	if action == "CreateFleet" {
		call.Overrides = fleetOverrides(req.p)
	}
	h.mu.Lock()
	if len(h.calls) >= maxCalls {
		h.calls = append(h.calls[:0], h.calls[len(h.calls)-maxCalls/2:]...)
	}
	h.calls = append(h.calls, call)
	h.mu.Unlock()
	body, apiErr := dispatch()
	if apiErr == nil {
		h.hold(r, req, body)
	}
	h.mu.Lock()
	call.End = time.Now()
	if apiErr != nil {
		call.Code = apiErr.Code
	}
	h.mu.Unlock()
	return body, apiErr
}

// hold waits, when this call's answer is to be held, until ReleaseHeld or
// the caller goes away.
func (h *holds) hold(r *http.Request, req *request, body any) {
	action := req.spec.name
	h.mu.Lock()
	if h.pending[action] <= 0 {
		h.mu.Unlock()
		return
	}
	h.pending[action]--
	release := h.release
	h.mu.Unlock()
	call := HeldCall{Action: action, UserAgent: r.UserAgent()}
	switch b := body.(type) {
	case *createFleetResponse:
		for _, fi := range b.Instances {
			call.InstanceIDs = append(call.InstanceIDs, fi.InstanceIDs...)
		}
	default:
		call.InstanceIDs = req.p.list("InstanceId")
	}
	select {
	case h.held <- call:
	default:
	}
	select {
	case <-release:
	case <-req.ctx.Done():
	}
}

// holdRequest is the body of POST /_sim/hold.
type holdRequest struct {
	// Action is the EC2 action whose answers to hold, e.g. "CreateFleet".
	Action string `json:"action"`
	// Count is how many successful calls to hold.
	Count int `json:"count"`
}

// registerHoldAdmin adds the admin endpoints of this file:
//
//	POST   /_sim/hold         {"action": "CreateFleet", "count": n}: HoldAnswers
//	GET    /_sim/hold         waits up to 30 s for a held call: HeldCall, or 204
//	DELETE /_sim/hold         ReleaseHeld
//	GET    /_sim/calls?action=CreateFleet   [Call...]
func (s *Simulator) registerHoldAdmin(mux *http.ServeMux) {
	mux.HandleFunc("/_sim/hold", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			var hr holdRequest
			if !readJSON(w, r, &hr) {
				return
			}
			if spec := lookupAction(hr.Action); spec == nil || !recordedActions[spec.name] || hr.Count < 0 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "action must be CreateFleet, RunInstances or TerminateInstances and count at least 0"})
				return
			}
			s.HoldAnswers(hr.Action, hr.Count)
			s.log.Info("Holding answers", "action", hr.Action, "count", hr.Count)
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet:
			select {
			case call := <-s.Held():
				writeJSON(w, http.StatusOK, call)
			case <-time.After(30 * time.Second):
				w.WriteHeader(http.StatusNoContent)
			case <-r.Context().Done():
			}
		case http.MethodDelete:
			s.ReleaseHeld()
			s.log.Info("Released held answers")
			w.WriteHeader(http.StatusNoContent)
		default:
			methodNotAllowed(w)
		}
	})
	mux.HandleFunc("/_sim/calls", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			methodNotAllowed(w)
			return
		}
		writeJSON(w, http.StatusOK, s.Calls(r.URL.Query().Get("action")))
	})
}
