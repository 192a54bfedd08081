package launchhealth

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults, chosen with the reasons below.
const (
	// DefaultThreshold is how many consecutive failures with the same cause
	// pause a pair. Three, as the P1 issue asks: one failure can be bad
	// luck, three with one cause is a configuration problem.
	DefaultThreshold = 3
	// DefaultBaseBackoff is the first pause. 30 s: long enough that a
	// relaunch loop costs at most a few calls a minute.
	DefaultBaseBackoff = 30 * time.Second
	// DefaultMaxBackoff caps the pause. 10 min: a fixed spec is picked up at
	// once (generation change), so the cap only bounds how long a transient
	// cause (an AMI briefly unavailable) keeps a NodePool idle.
	DefaultMaxBackoff = 10 * time.Minute
)

// Key identifies a NodePool and the EC2NodeClass it launches with.
type Key struct {
	NodePool  string
	NodeClass string
}

// Generations are the metadata.generation of the NodePool and the
// EC2NodeClass when a failure was seen. A pause ends when either changes.
type Generations struct {
	NodePool  int64
	NodeClass int64
}

// State is the launch health of one Key.
type State struct {
	// Cause is the cause of the consecutive failures, e.g.
	// "LaunchFailed/InvalidParameterValue" or "RegistrationTimeout".
	Cause string
	// Message is the last failure's message, naming the field to fix.
	Message string
	// Consecutive counts failures in a row with Cause.
	Consecutive int
	// PausedUntil is when provisioning for the pair may resume; zero when
	// not paused.
	PausedUntil time.Time
	// Generations are those seen with the last failure.
	Generations Generations
}

// Options configure a Tracker; zero values take the defaults above.
type Options struct {
	Threshold   int
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// Clock reads the current time, from which pauses start and end.
	// Default clock.RealClock; tests pass a k8s.io/utils/clock/testing
	// fake.
	Clock clock.PassiveClock
	// Jitter returns a factor in [0.8, 1.2) applied to each pause. Default
	// random; tests set a constant.
	Jitter func() float64
}

// Tracker is safe for concurrent use. A nil *Tracker tracks nothing and
// never pauses (launch health switched off).
type Tracker struct {
	opts   Options
	mu     sync.Mutex
	states map[Key]*State
}

// New returns a Tracker with opts' defaults filled.
func New(opts Options) *Tracker {
	if opts.Threshold <= 0 {
		opts.Threshold = DefaultThreshold
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = DefaultBaseBackoff
	}
	if opts.MaxBackoff < opts.BaseBackoff {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0.8 + 0.4*rand.Float64() }
	}
	return &Tracker{opts: opts, states: map[Key]*State{}}
}

// Failure records a failed launch or registration of key with cause and
// returns the resulting state. From the Threshold-th consecutive failure
// with the same cause on, the pair is paused for BaseBackoff·2^(n-Threshold)
// (jittered, capped at MaxBackoff). A different cause restarts the count.
func (t *Tracker) Failure(key Key, gens Generations, cause, message string) State {
	if t == nil {
		return State{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.states[key]
	if s == nil || s.Cause != cause || s.Generations != gens {
		s = &State{Cause: cause}
		t.states[key] = s
	}
	s.Consecutive++
	s.Message = message
	s.Generations = gens
	if s.Consecutive >= t.opts.Threshold {
		backoff := Backoff(t.opts.BaseBackoff, t.opts.MaxBackoff, s.Consecutive-t.opts.Threshold+1)
		s.PausedUntil = t.opts.Clock.Now().Add(time.Duration(float64(backoff) * t.opts.Jitter()))
	}
	return *s
}

// Backoff returns base·2^(attempt-1) for attempt 1, 2, …, capped at
// maxWait (also when base is not positive or the product overflows). It
// is the delay of both the pair pause here and the per-NodeClaim launch
// retry (package nodeclaim/lifecycle), which share the
// --launch-backoff-base and --launch-backoff-max flags.
func Backoff(base, maxWait time.Duration, attempt int) time.Duration {
	shift := max(attempt-1, 0)
	if base <= 0 || shift >= 63 || base > maxWait>>shift {
		return maxWait
	}
	return base << shift
}

// Success forgets key's failures: a Node of the pair registered.
func (t *Tracker) Success(key Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.states, key)
}

// Paused reports whether provisioning for key must wait, and the state. A
// pause ends when it expires or when gens differ from the generations of
// the failures (the spec changed); the failure count is kept after expiry
// so that the next failure pauses again, longer.
func (t *Tracker) Paused(key Key, gens Generations) (bool, State) {
	s, ok := t.current(key, gens, true)
	if !ok {
		return false, State{}
	}
	return t.opts.Clock.Now().Before(s.PausedUntil), s
}

// Unhealthy reports whether key has failed at least Threshold times in a
// row with one cause and no registration since, whether or not its pause
// has expired: a retry after the pause does not make the pair healthy,
// only a registered Node or a spec change does.
func (t *Tracker) Unhealthy(key Key, gens Generations) (bool, State) {
	s, ok := t.current(key, gens, false)
	if !ok {
		return false, State{}
	}
	return s.Consecutive >= t.opts.Threshold, s
}

// current returns a copy of key's state when it was recorded for gens. ok
// is false when t is nil, key has no state, or its state was recorded for
// other generations (the spec changed since); forget then drops that stale
// state.
func (t *Tracker) current(key Key, gens Generations, forget bool) (s State, ok bool) {
	if t == nil {
		return State{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.states[key]
	if st == nil {
		return State{}, false
	}
	if st.Generations != gens {
		if forget {
			delete(t.states, key)
		}
		return State{}, false
	}
	return *st, true
}

// String describes a state for events and conditions.
func (s State) String() string {
	return fmt.Sprintf("%d consecutive launches failed with %s: %s", s.Consecutive, s.Cause, s.Message)
}
