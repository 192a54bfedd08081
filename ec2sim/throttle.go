package ec2sim

import (
	"sync"
	"time"

	"github.com/karpx/karpx/catalog/awsquota"
)

// Bucket is a token bucket (awsquota.Bucket): a request takes one token;
// Size tokens at most; RefillPerSecond tokens come back every second of
// Config.Clock. Throttled requests take no token. A Size of 0 means
// unlimited.
type Bucket = awsquota.Bucket

// ThrottleCategory names a throttling class of actions (awsquota.Category):
// the categories, their AWS sources and the charge of every action are in
// catalog/awsquota, which the client-side budget reads too. When a bucket
// is empty the simulator answers RequestLimitExceeded (EC2),
// ThrottlingException (SSM) or RequestThrottled (SQS, HTTP 400); tests that
// want throttling set smaller buckets through ThrottleConfig or inject
// those codes with a FaultRule.
type ThrottleCategory = awsquota.Category

// ThrottleConfig sizes the token buckets. Like EC2, every action has its own
// bucket, sized by its category ("each API is evaluated individually").
type ThrottleConfig struct {
	// Disabled turns throttling off.
	Disabled bool `json:"disabled"`
	// Categories overrides bucket sizes per category; missing categories use
	// DefaultThrottleConfig's.
	Categories map[ThrottleCategory]Bucket `json:"categories,omitempty"`
	// Actions overrides the bucket of single actions (key: action name, e.g.
	// "DescribeInstances", or "DescribeInstances/unfiltered" for its
	// unfiltered bucket).
	Actions map[string]Bucket `json:"actions,omitempty"`
	// Neighbours is the share, in [0, NeighbourShareMax], of every bucket
	// (size and refill rate) consumed by the account's other clients; see
	// neighbours.go. Zero means the simulator's callers have the account
	// to themselves.
	Neighbours float64 `json:"neighbours,omitempty"`
}

// DefaultThrottleConfig returns awsquota's default buckets: the documented
// EC2 and SSM limits for an account in a region, and the SQS figures (see
// awsquota.SQSReceive). IAM has none: its calls are not throttled.
func DefaultThrottleConfig() ThrottleConfig {
	return ThrottleConfig{Categories: awsquota.Buckets()}
}

// DefaultBucket returns the token bucket the simulator charges a call of
// action to under DefaultThrottleConfig: awsquota's bucket of the category
// awsquota charges the action to, or, for a bare call (no filters, ids,
// names or MaxResults) of an action with an unfiltered bucket
// (DescribeInstances, DescribeSecurityGroups), of
// awsquota.UnfilteredNonMutating. ok is false when the simulator does not
// answer action, or answers it without a default bucket (the IAM actions,
// awsquota.IAM). Config.Throttle overrides are not taken into account.
func DefaultBucket(action string, bare bool) (b Bucket, ok bool) {
	if lookupAction(action) == nil {
		return Bucket{}, false
	}
	cat, _ := awsquota.CategoryOf(action, bare)
	b, ok = awsquota.Buckets()[cat]
	return b, ok
}

// DefaultRefillRate returns the refill rate, in requests per second, of
// DefaultBucket(action, false): for DescribeInstances and
// DescribeSecurityGroups that is the rate of filtered calls, the only
// shapes karpx sends and test/e2e counts. ok and perSecond 0 as
// DefaultBucket's ok.
func DefaultRefillRate(action string) (perSecond float64, ok bool) {
	b, ok := DefaultBucket(action, false)
	return b.RefillPerSecond, ok
}

func (tc ThrottleConfig) withDefaults() ThrottleConfig {
	def := DefaultThrottleConfig()
	out := ThrottleConfig{Disabled: tc.Disabled, Neighbours: tc.Neighbours, Categories: def.Categories, Actions: map[string]Bucket{}}
	for c, b := range tc.Categories {
		out.Categories[c] = b
	}
	for a, b := range tc.Actions {
		out.Actions[a] = b
	}
	return out
}

// throttler holds the live buckets.
type throttler struct {
	mu      sync.Mutex
	cfg     ThrottleConfig
	buckets map[string]*bucketState
}

type bucketState struct {
	Bucket
	tokens float64
	last   time.Time
}

func newThrottler(cfg ThrottleConfig) *throttler {
	return &throttler{cfg: cfg, buckets: map[string]*bucketState{}}
}

// allow takes a token from the bucket of (action, category) at now (the
// request's arrival on Config.Clock, so a fake clock decides the refill)
// and reports whether the request may proceed.
func (t *throttler) allow(action string, cat ThrottleCategory, unfiltered bool, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg.Disabled {
		return true
	}
	key := action
	if unfiltered {
		key += "/unfiltered"
	}
	b, ok := t.buckets[key]
	if !ok {
		spec, ok := t.cfg.Actions[key]
		if !ok {
			spec = t.cfg.Categories[cat]
		}
		spec = t.cfg.leftByNeighbours(spec)
		b = &bucketState{Bucket: spec, tokens: spec.Size, last: now}
		t.buckets[key] = b
	}
	if b.Size <= 0 {
		return true // a zero bucket means "unlimited"
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(b.Size, b.tokens+el*b.RefillPerSecond)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// set replaces the configuration and refills every bucket.
func (t *throttler) set(cfg ThrottleConfig) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg = cfg.withDefaults()
	t.buckets = map[string]*bucketState{}
}

func (t *throttler) config() ThrottleConfig {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg
}
