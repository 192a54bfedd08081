package batcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

// Batch windows and caps. A window closes IdleTimeout after its last
// request or MaxTimeout after its first, whichever comes first, or when it
// holds MaxItems items.
//
// CreateFleet: 35ms idle, 1s max, as Karpenter's AWS provider. karpx's
// provisioner creates a scale-up's NodeClaims within milliseconds of each
// other, and each one's launch reaches CreateFleet after a few cached
// lookups, so 35ms of quiet means the burst is over; the 1s cap bounds the
// delay added to a launch that takes about a minute to become a Node.
// MaxItems 1,000 instances (Karpenter's cap), which also bounds how many
// NodeClaims one failed call (say, no capacity in any pool) fails at once.
//
// DescribeInstances and TerminateInstances: 100ms idle, 1s max, as
// Karpenter. Registration and termination reconcile NodeClaims one by one,
// tens of milliseconds apart, so a wider idle window catches more of them;
// neither is latency-sensitive at this scale. MaxItems 500 instance ids:
// the TerminateInstances API reference allows up to 1,000 ids per call and
// recommends smaller batches; DescribeInstances documents no limit for
// InstanceIds and gets the same cap, which keeps a request's query string
// near 20 KB.
const (
	CreateFleetIdleTimeout        = 35 * time.Millisecond
	CreateFleetMaxTimeout         = time.Second
	CreateFleetMaxItems           = 1000
	DescribeInstancesIdleTimeout  = 100 * time.Millisecond
	DescribeInstancesMaxTimeout   = time.Second
	DescribeInstancesMaxItems     = 500
	TerminateInstancesIdleTimeout = 100 * time.Millisecond
	TerminateInstancesMaxTimeout  = time.Second
	TerminateInstancesMaxItems    = 500
)

// Options configure an API.
type Options struct {
	// DeferredTagKeys are instance tag keys whose values may differ between
	// CreateFleet requests that are merged: the merged fleet is launched
	// without them, then each caller's instances get the caller's values
	// with one CreateTags call per caller (through the same API stack, so
	// within budget), in the background once CreateFleet has returned to
	// it (API.WaitTagged waits for them). Such tags land on the instances
	// only, not on their volumes; API.Stop ends them. Empty means
	// CreateFleet requests merge only when their tags are identical.
	DeferredTagKeys []string
	// NodeClaimTagKey is the deferred tag key whose value names the
	// NodeClaim (karpenter.sh/nodeclaim), logged as "NodeClaim" when its
	// tagging fails. Empty logs no NodeClaim name.
	NodeClaimTagKey string
	// Registerer receives the batchers' metrics (MetricBatchSize,
	// MetricWindowSeconds). Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives the log lines (failed deferred tagging, surplus
	// instances). Zero means logr.Discard().
	Logger logr.Logger
}

// API is an ec2api.API that merges concurrent CreateFleet,
// DescribeInstances (by instance id) and TerminateInstances calls and
// passes every other call through. It is safe for concurrent use.
type API struct {
	ec2api.API // every call API does not batch goes straight to next
	next       ec2api.API
	log        logr.Logger
	deferred   map[string]bool
	// nodeClaimTagKey is Options.NodeClaimTagKey.
	nodeClaimTagKey string
	// tagging counts the deferred CreateTags calls in flight (tagLater).
	tagging inFlight
	// stopTags ends when Stop cancels the calls in flight (cancelTags).
	stopTags   context.Context
	cancelTags context.CancelFunc

	fleet     *Batcher[fleetRequest, fleetResult]
	describe  *Batcher[describeRequest, ec2.DescribeInstancesOutput]
	terminate *Batcher[terminateRequest, ec2.TerminateInstancesOutput]
}

var _ ec2api.API = (*API)(nil)

// New returns an API that batches calls to next. Place it above the
// budget: callers → batcher.API → ec2api.Client with budget.Limiter on its stack.
func New(next ec2api.API, opts Options) *API {
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	a := &API{API: next, next: next, log: opts.Logger.WithName("batcher"), deferred: map[string]bool{}, nodeClaimTagKey: opts.NodeClaimTagKey}
	a.stopTags, a.cancelTags = context.WithCancel(context.Background())
	for _, k := range opts.DeferredTagKeys {
		a.deferred[k] = true
	}
	m := NewMetrics(opts.Registerer)
	a.fleet = NewBatcher(BatcherOptions[fleetRequest, fleetResult]{
		Name: "CreateFleet", IdleTimeout: CreateFleetIdleTimeout, MaxTimeout: CreateFleetMaxTimeout, MaxItems: CreateFleetMaxItems,
		Key: a.fleetKey, Weight: fleetWeight, Execute: a.execFleet, Single: a.singleFleet, RunToCompletion: true, Metrics: m,
	})
	a.describe = NewBatcher(BatcherOptions[describeRequest, ec2.DescribeInstancesOutput]{
		Name: "DescribeInstances", IdleTimeout: DescribeInstancesIdleTimeout, MaxTimeout: DescribeInstancesMaxTimeout, MaxItems: DescribeInstancesMaxItems,
		Key: describeKey, Weight: describeWeight, Execute: a.execDescribe, Single: a.singleDescribe, Metrics: m,
	})
	a.terminate = NewBatcher(BatcherOptions[terminateRequest, ec2.TerminateInstancesOutput]{
		Name: "TerminateInstances", IdleTimeout: TerminateInstancesIdleTimeout, MaxTimeout: TerminateInstancesMaxTimeout, MaxItems: TerminateInstancesMaxItems,
		Key: terminateKey, Weight: terminateWeight, Execute: a.execTerminate, Single: a.singleTerminate, RunToCompletion: true, Metrics: m,
	})
	return a
}

// hashJSON returns a digest of v's JSON form, a batch key.
func hashJSON(v any) (string, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}
