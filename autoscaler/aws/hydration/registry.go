package hydration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Names of the data sets karpx's providers report.
const (
	// InstanceTypes is DescribeInstanceTypes: what each type is and holds.
	InstanceTypes = "instance-types"
	// Offerings is DescribeInstanceTypeOfferings: the zones each type is sold in.
	Offerings = "offerings"
	// SpotPrices is DescribeSpotPriceHistory; without it spot offerings are
	// ranked at on-demand prices.
	SpotPrices = "spot-prices"
	// Subnets, SecurityGroups and AMIs are the EC2NodeClass resolutions
	// (per class, on demand); their state is the last resolution's.
	Subnets        = "subnets"
	SecurityGroups = "security-groups"
	AMIs           = "amis"
)

// HandlerPath is where Handler is served on the metrics address.
const HandlerPath = "/hydration"

// State is one data set's state, as `kubectl karpx status` shows it.
type State struct {
	// Name is the data set's name, for example "instance-types".
	Name string `json:"name"`
	// Required is true when /readyz waits for this set.
	Required bool `json:"required"`
	// Hydrated is true once one refresh succeeded.
	Hydrated bool `json:"hydrated"`
	// HydratedAt is the time of the last successful refresh (zero before).
	HydratedAt time.Time `json:"hydratedAt,omitzero"`
	// Items is the number of items of the last good answer.
	Items int `json:"items"`
	// LastError is the error of the last failed refresh since the last
	// success ("" when the last refresh succeeded).
	LastError string `json:"lastError,omitempty"`
	// LastAttempt is the time of the last refresh, good or bad.
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
}

// Registry tracks data sets. It is safe for concurrent use; the zero value
// is not usable, create it with NewRegistry.
type Registry struct {
	mu      sync.Mutex
	sets    map[string]*State
	changed chan struct{} // closed and replaced on every hydration
	clk     clock.PassiveClock
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{sets: map[string]*State{}, changed: make(chan struct{}), clk: clock.RealClock{}}
}

// Require declares data sets that /readyz waits for.
func (r *Registry) Require(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		r.get(n).Required = true
	}
}

func (r *Registry) get(name string) *State {
	s := r.sets[name]
	if s == nil {
		s = &State{Name: name}
		r.sets[name] = s
	}
	return s
}

// Succeeded records a good refresh of name with items items.
func (r *Registry) Succeeded(name string, items int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.get(name)
	now := r.clk.Now()
	first := !s.Hydrated
	s.Hydrated, s.HydratedAt, s.LastAttempt, s.Items, s.LastError = true, now, now, items, ""
	if first {
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// Failed records a failed refresh of name; the last good data (and Items)
// stays.
func (r *Registry) Failed(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.get(name)
	s.LastAttempt, s.LastError = r.clk.Now(), err.Error()
}

// Hydrated reports whether every named data set is hydrated.
func (r *Registry) Hydrated(names ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.missing(names)) == 0
}

func (r *Registry) missing(names []string) []string {
	var out []string
	for _, n := range names {
		if s := r.sets[n]; s == nil || !s.Hydrated {
			out = append(out, n)
		}
	}
	return out
}

// Wait blocks until every named data set is hydrated or ctx ends (then it
// returns ctx's error).
func (r *Registry) Wait(ctx context.Context, names ...string) error {
	for {
		r.mu.Lock()
		done, ch := len(r.missing(names)) == 0, r.changed
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// States returns every data set's state, sorted by name.
func (r *Registry) States() []State {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]State, 0, len(r.sets))
	for _, s := range r.sets {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Check is a controller-runtime healthz.Checker for /readyz: it fails,
// naming them and their last errors, while required data sets are not
// hydrated.
func (r *Registry) Check(_ *http.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var msgs []string
	for _, s := range r.sets {
		if s.Required && !s.Hydrated {
			m := s.Name + " not hydrated"
			if s.LastError != "" {
				m += " (last error: " + s.LastError + ")"
			}
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	sort.Strings(msgs)
	return errors.New(strings.Join(msgs, "; "))
}

// Handler serves States as JSON ({"dataSets": [...]}).
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Report{DataSets: r.States()})
	})
}

// Report is Handler's JSON document.
type Report struct {
	DataSets []State `json:"dataSets"`
}

// NotHydratedError is returned by providers asked for data that has not
// loaded yet. It is transient: the caller retries with backoff.
type NotHydratedError struct {
	// DataSet is the data set's name.
	DataSet string
	// Err is the last refresh's error, if any.
	Err error
}

func (e *NotHydratedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s not hydrated yet (transient, retrying): %v", e.DataSet, e.Err)
	}
	return fmt.Sprintf("%s not hydrated yet (transient, retrying)", e.DataSet)
}

func (e *NotHydratedError) Unwrap() error { return e.Err }

// IsNotHydrated reports whether err is or wraps a *NotHydratedError.
func IsNotHydrated(err error) bool {
	var e *NotHydratedError
	return errors.As(err, &e)
}
