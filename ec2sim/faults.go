package ec2sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// FaultRule injects an error answer and/or latency into calls of an action.
//
// Rules are evaluated in the order they were added. A rule applies to a
// call when it matches the call's action, is not over (For), passes its
// Probability draw and has something to give the call: its Latency (the
// latencies of every applying rule add up), or its Code when no earlier
// rule supplied the call's error already (the first applying rule with a
// Code decides the error). A rule with a Code and no Latency, met after
// another rule supplied the error, does not apply to that call: it draws no
// probability and its Count is left alone. A rule with both applies for
// its Latency even when the error is another rule's.
//
// Count is the number of calls a rule applies to; it is removed after the
// last one. So two error rules for one action with Count 1 each answer the
// next two calls, the first rule the first call and the second the second.
// Without Count and Probability a rule applies to every matching call until
// cleared; with Probability in (0, 1), to each with that probability. With
// For, the rule also ends For after it was added (Config.Clock), e.g. "SQS
// answers 503 for a minute".
type FaultRule struct {
	// Action is the action name ("CreateFleet", "GetParameter",
	// "ReceiveMessage"), "sqs:*" for every SQS action, or "*" for every
	// action.
	Action string `json:"action"`
	// Code is the error code to answer with, e.g. "RequestLimitExceeded",
	// "InternalError", "Unavailable", "InsufficientInstanceCapacity". Empty
	// means no error (latency only).
	Code string `json:"code,omitempty"`
	// Message is the error message. Default: EC2's message for Code.
	Message string `json:"message,omitempty"`
	// HTTPStatus is the status of the error answer. Default: EC2's status
	// for Code (503 for RequestLimitExceeded and Unavailable, 500 for
	// InternalError, 400 otherwise).
	HTTPStatus int `json:"httpStatus,omitempty"`
	// Count is how many calls the rule applies to (see above: calls whose
	// error another rule supplied do not count); 0 = unlimited.
	Count int `json:"count,omitempty"`
	// Probability, when in (0, 1], applies the rule to a matching call with
	// that probability (drawn from Config.Seed).
	Probability float64 `json:"probability,omitempty"`
	// Latency is added before the call is answered (JSON: "250ms").
	Latency metav1.Duration `json:"latency,omitempty"`
	// For limits the rule to this long after it was added, on the
	// simulator's clock (JSON: "60s"); 0 means no time limit.
	For metav1.Duration `json:"for,omitempty"`
	// Until is when a rule with For ends; set by Add, ignored on input.
	Until *metav1.Time `json:"until,omitempty"`
}

// faultAllSQS is the Action of a rule for every SQS action.
const faultAllSQS = "sqs:*"

// matches reports whether the rule's Action covers action.
func (r FaultRule) matches(action string) bool {
	if r.Action == "*" || r.Action == action {
		return true
	}
	spec := lookupAction(action)
	return r.Action == faultAllSQS && spec != nil && spec.service == serviceSQS
}

// CapacityFault makes CreateFleet answer InsufficientInstanceCapacity for
// the matching capacity pools (instance type × zone × capacity type). Empty
// fields match anything; InstanceType accepts EC2 wildcards ("p4d.*").
type CapacityFault struct {
	// InstanceType is the instance type pattern, e.g. "m5.large" or "g5.*".
	InstanceType string `json:"instanceType,omitempty"`
	// Zone is the availability zone name, e.g. "us-east-1a".
	Zone string `json:"zone,omitempty"`
	// CapacityType is "on-demand" or "spot".
	CapacityType string `json:"capacityType,omitempty"`
	// Count is how many launch attempts are refused; 0 = until cleared.
	Count int `json:"count,omitempty"`
}

// FaultSet is the JSON form of all faults, as served by /_sim/faults.
type FaultSet struct {
	// Rules are the error and latency rules.
	Rules []FaultRule `json:"rules"`
	// Capacity are the insufficient-capacity pools.
	Capacity []CapacityFault `json:"capacity"`
}

// Faults holds the injected faults of a Simulator. It is safe for
// concurrent use.
type Faults struct {
	mu       sync.Mutex
	rules    []FaultRule
	capacity []CapacityFault
	rng      *rand.Rand
	clock    clock.PassiveClock // Config.Clock, for FaultRule.For
}

func (f *Faults) now() time.Time {
	if f.clock == nil {
		return time.Now()
	}
	return f.clock.Now()
}

func newFaults(seed uint64) *Faults {
	return &Faults{rng: rand.New(rand.NewPCG(seed, seed^0xfa017))}
}

func (r FaultRule) validate() error {
	if r.Action == "" {
		return fmt.Errorf("fault rule: action is required (an action name or \"*\")")
	}
	if r.Action != "*" && r.Action != faultAllSQS && lookupAction(r.Action) == nil {
		return fmt.Errorf("fault rule: unknown action %q", r.Action)
	}
	if r.Probability < 0 || r.Probability > 1 {
		return fmt.Errorf("fault rule: probability %v is not in [0, 1]", r.Probability)
	}
	if r.Count < 0 || r.Latency.Duration < 0 || r.For.Duration < 0 {
		return fmt.Errorf("fault rule: count, latency and for must not be negative")
	}
	if r.Code == "" && r.Latency.Duration == 0 {
		return fmt.Errorf("fault rule for %s: needs a code or a latency", r.Action)
	}
	return nil
}

// Add appends rules. It returns an error, and adds nothing, when a rule
// names an unknown action, has no code and no latency, or has a negative
// count, latency or a probability outside [0, 1].
func (f *Faults) Add(rules ...FaultRule) error {
	for _, r := range rules {
		if err := r.validate(); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for _, r := range rules {
		r.Until = nil
		if r.For.Duration > 0 {
			r.Until = &metav1.Time{Time: now.Add(r.For.Duration)}
		}
		f.rules = append(f.rules, r)
	}
	return nil
}

// FailNext makes the next n calls of action that no earlier rule fails
// fail with code (HTTP status as EC2 answers it). It returns Add's errors.
func (f *Faults) FailNext(action, code string, n int) error {
	return f.Add(FaultRule{Action: action, Code: code, Count: n})
}

// AddLatency delays every call of action (or "*") by d until cleared. It
// returns Add's errors.
func (f *Faults) AddLatency(action string, d time.Duration) error {
	return f.Add(FaultRule{Action: action, Latency: metav1.Duration{Duration: d}})
}

// AddCapacity appends insufficient-capacity pools. It returns an error, and
// adds nothing, when a capacity type is neither "", "on-demand" nor "spot"
// or a count is negative.
func (f *Faults) AddCapacity(pools ...CapacityFault) error {
	for _, p := range pools {
		if p.CapacityType != "" && p.CapacityType != capacityOnDemand && p.CapacityType != capacitySpot {
			return fmt.Errorf("capacity fault: capacityType %q is not on-demand or spot", p.CapacityType)
		}
		if p.Count < 0 {
			return fmt.Errorf("capacity fault: negative count")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capacity = append(f.capacity, pools...)
	return nil
}

// Set replaces every fault with fs. It returns the validation errors of Add
// and AddCapacity, and then changes nothing.
func (f *Faults) Set(fs FaultSet) error {
	n := &Faults{clock: f.clock}
	if err := n.Add(fs.Rules...); err != nil {
		return err
	}
	if err := n.AddCapacity(fs.Capacity...); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.capacity = n.rules, n.capacity
	return nil
}

// Get returns a copy of the current faults.
func (f *Faults) Get() FaultSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FaultSet{Rules: append([]FaultRule{}, f.rules...), Capacity: append([]CapacityFault{}, f.capacity...)}
}

// Clear removes every fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.capacity = nil, nil
}

// evaluate applies the rules to one call of action, as FaultRule describes:
// the latency to add and the error to answer with (nil for none). It
// consumes one count of every rule that applies and removes rules that are
// used up or over.
func (f *Faults) evaluate(action string) (time.Duration, *APIError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var (
		latency time.Duration
		apiErr  *APIError
		kept    = f.rules[:0]
		now     = f.now()
	)
	for _, r := range f.rules {
		if r.Until != nil && !now.Before(r.Until.Time) {
			continue // its time is over
		}
		suppliesError := r.Code != "" && apiErr == nil
		applies := r.matches(action) && (r.Latency.Duration > 0 || suppliesError)
		if applies && r.Probability > 0 && r.Probability < 1 {
			applies = f.rng.Float64() < r.Probability
		}
		if applies {
			latency += r.Latency.Duration
			if suppliesError {
				apiErr = r.apiError()
			}
			if r.Count > 0 {
				r.Count--
				if r.Count == 0 {
					continue // used up
				}
			}
		}
		kept = append(kept, r)
	}
	f.rules = kept
	return latency, apiErr
}

// apiError is the error answer of a rule with a Code: its Message and
// HTTPStatus, or EC2's for the code.
func (r FaultRule) apiError() *APIError {
	e := &APIError{Code: r.Code, Message: r.Message, HTTPStatus: r.HTTPStatus}
	if e.Message == "" {
		e.Message = defaultMessage(r.Code)
	}
	if e.HTTPStatus == 0 {
		e.HTTPStatus = defaultStatus(r.Code)
	}
	return e
}

// insufficient reports whether a launch in the pool is refused, consuming
// one count of the first matching capacity fault.
func (f *Faults) insufficient(instanceType, zone, capacityType string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.capacity {
		if (p.InstanceType == "" || wildcardMatch(p.InstanceType, instanceType)) &&
			(p.Zone == "" || p.Zone == zone) &&
			(p.CapacityType == "" || p.CapacityType == capacityType) {
			if p.Count > 0 {
				f.capacity[i].Count--
				if f.capacity[i].Count == 0 {
					f.capacity = append(f.capacity[:i], f.capacity[i+1:]...)
				}
			}
			return true
		}
	}
	return false
}
