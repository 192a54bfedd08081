package ec2sim

import (
	"sync"
	"time"
)

// Bucket is a token bucket: a request takes one token; Size tokens at most;
// RefillPerSecond tokens come back every second. Throttled requests take no
// token. A Size of 0 means unlimited.
type Bucket struct {
	// Size is the bucket capacity in requests (the burst).
	Size float64 `json:"size"`
	// RefillPerSecond is the sustained rate in requests per second.
	RefillPerSecond float64 `json:"refillPerSecond"`
}

// ThrottleCategory names a throttling class of actions.
type ThrottleCategory string

// Throttling categories. Source for EC2: "Request throttling for the Amazon
// EC2 API" (Amazon EC2 Developer Guide, request token bucket sizes and refill
// rates); for SSM: "AWS Systems Manager endpoints and quotas" (Parameter
// Store GetParameter default throughput 40 transactions per second).
const (
	// CategoryNonMutating is Describe*/Get*/List*: bucket 100, refill 20/s.
	CategoryNonMutating ThrottleCategory = "non-mutating"
	// CategoryUnfilteredNonMutating is DescribeInstances,
	// DescribeSecurityGroups, DescribeNetworkInterfaces, DescribeVolumes,
	// DescribeSnapshots and DescribeSpotInstanceRequests when called without
	// filters, ids and MaxResults: bucket 50, refill 10/s.
	CategoryUnfilteredNonMutating ThrottleCategory = "unfiltered-non-mutating"
	// CategoryMutating is Create*/Delete*/Modify* (CreateFleet,
	// CreateLaunchTemplate, DeleteLaunchTemplate ...): bucket 50, refill 5/s.
	CategoryMutating ThrottleCategory = "mutating"
	// CategoryRunInstances is RunInstances: bucket 5, refill 2/s.
	CategoryRunInstances ThrottleCategory = "run-instances"
	// CategoryTerminateInstances is TerminateInstances: bucket 100, refill 5/s.
	CategoryTerminateInstances ThrottleCategory = "terminate-instances"
	// CategoryCreateTags is CreateTags: bucket 100, refill 10/s.
	CategoryCreateTags ThrottleCategory = "create-tags"
	// CategorySSMGetParameter is SSM GetParameter: bucket 40, refill 40/s.
	CategorySSMGetParameter ThrottleCategory = "ssm-get-parameter"

	// SQS publishes no per-account API rate for standard queues ("nearly
	// unlimited number of API calls per second, per API action", Amazon SQS
	// Developer Guide, "Amazon SQS standard queues"); its only per-action
	// figure is FIFO's 3,000 messages per second with batching ("Amazon SQS
	// FIFO queue quotas"). The simulator uses that figure for the message
	// actions, as bucket and refill, so only a consumer spinning without
	// long polling is ever throttled (answer: RequestThrottled, HTTP 400),
	// and 100/s for the queue-management actions, which a consumer calls
	// once at start. Tests that want throttling set smaller buckets through
	// ThrottleConfig or inject RequestThrottled with a FaultRule.

	// CategorySQSReceive is ReceiveMessage: bucket 3000, refill 3000/s.
	CategorySQSReceive ThrottleCategory = "sqs-receive"
	// CategorySQSDelete is DeleteMessage, DeleteMessageBatch and
	// ChangeMessageVisibility: bucket 3000, refill 3000/s.
	CategorySQSDelete ThrottleCategory = "sqs-delete"
	// CategorySQSSend is SendMessage: bucket 3000, refill 3000/s.
	CategorySQSSend ThrottleCategory = "sqs-send"
	// CategorySQSQueue is GetQueueUrl, GetQueueAttributes, CreateQueue and
	// SetQueueAttributes: bucket 100, refill 100/s.
	CategorySQSQueue ThrottleCategory = "sqs-queue"
)

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

// DefaultThrottleConfig returns the documented EC2 and SSM limits for an
// account in a region, and the simulator's SQS figures (see the
// ThrottleCategory constants).
func DefaultThrottleConfig() ThrottleConfig {
	return ThrottleConfig{Categories: map[ThrottleCategory]Bucket{
		CategoryNonMutating:           {Size: 100, RefillPerSecond: 20},
		CategoryUnfilteredNonMutating: {Size: 50, RefillPerSecond: 10},
		CategoryMutating:              {Size: 50, RefillPerSecond: 5},
		CategoryRunInstances:          {Size: 5, RefillPerSecond: 2},
		CategoryTerminateInstances:    {Size: 100, RefillPerSecond: 5},
		CategoryCreateTags:            {Size: 100, RefillPerSecond: 10},
		CategorySSMGetParameter:       {Size: 40, RefillPerSecond: 40},
		CategorySQSReceive:            {Size: 3000, RefillPerSecond: 3000},
		CategorySQSDelete:             {Size: 3000, RefillPerSecond: 3000},
		CategorySQSSend:               {Size: 3000, RefillPerSecond: 3000},
		CategorySQSQueue:              {Size: 100, RefillPerSecond: 100},
	}}
}

// DefaultRefillRate returns the refill rate, in requests per second, of
// action's token bucket under DefaultThrottleConfig: the simulator's table of
// AWS bucket sizes (see the ThrottleCategory constants), by the category
// actionTable charges the action to. For actions with an unfiltered bucket
// (DescribeInstances, DescribeSecurityGroups) it is the rate of filtered
// calls, those with filters, ids or MaxResults: the only shapes karpx sends
// and test/e2e counts. Bare calls are charged to
// CategoryUnfilteredNonMutating instead, which this does not report.
// ok is false when the simulator does not answer action, or answers it
// without a default bucket (the IAM actions, CategoryIAM); then perSecond
// is 0. Config.Throttle overrides are not taken into account.
func DefaultRefillRate(action string) (perSecond float64, ok bool) {
	spec := lookupAction(action)
	if spec == nil {
		return 0, false
	}
	b, ok := DefaultThrottleConfig().Categories[spec.category]
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

// allow takes a token from the bucket of (action, category) at now and
// reports whether the request may proceed.
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
