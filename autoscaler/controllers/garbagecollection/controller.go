package garbagecollection

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/timeouts"
)

// Options configure the garbage collector.
type Options struct {
	// Period between passes. Default 2m, Karpenter's garbage-collection
	// period: one paginated DescribeInstances per period.
	Period time.Duration
	// Grace is how long an instance must stay unclaimed (or a NodeClaim's
	// instance stay gone) before karpx acts. Default 5m: far longer than
	// the seconds between CreateFleet returning and the NodeClaim's
	// status recording the providerID.
	Grace time.Duration
	// Clock times the passes and how long an instance has been unclaimed.
	// Default clock.RealClock; tests pass a k8s.io/utils/clock/testing
	// fake.
	Clock clock.WithTicker
}

// Collector is a leader-only manager.Runnable.
type Collector struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	opts     Options
	// orphanSince and goneSince remember when a pass first saw an
	// unclaimed instance (by providerID) or a NodeClaim without instance.
	orphanSince map[string]time.Time
	goneSince   map[string]time.Time
	// terminated are the orphans this collector terminated that EC2 still
	// lists (shutting-down): not terminated, nor logged, again.
	terminated map[string]bool
}

// New returns a Collector with defaults filled.
func New(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, opts Options) *Collector {
	timeouts.Default(&opts.Period, 2*time.Minute)
	timeouts.Default(&opts.Grace, 5*time.Minute)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Collector{kube: kube, cloud: cloud, recorder: recorder, opts: opts,
		orphanSince: map[string]time.Time{}, goneSince: map[string]time.Time{}, terminated: map[string]bool{}}
}

// NeedLeaderElection makes the Collector run only on the leader.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start runs a pass every Period until ctx is done.
func (c *Collector) Start(ctx context.Context) error {
	ticker := c.opts.Clock.NewTicker(c.opts.Period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			c.Pass(ctx)
		}
	}
}

// Pass runs one garbage-collection pass. Cloud or API errors end the pass
// without acting; they are logged.
func (c *Collector) Pass(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx).WithName("garbagecollection")
	var claims karpv1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		log.Error(err, "listing NodeClaims; skipping pass")
		return
	}
	instances, err := c.cloud.List(ctx)
	if err != nil {
		log.Info("cloud list failed; skipping pass, nothing is deleted on a failed answer", "error", err.Error())
		return
	}
	now := c.opts.Clock.Now()
	live := c.collectInstances(ctx, log, claims.Items, instances, now)
	c.collectNodeClaims(ctx, log, claims.Items, live, now)
}

// collectInstances terminates the instances no NodeClaim in claims claims
// once they have been unclaimed for Grace, and returns the providerIDs of
// every listed instance. A NodeClaim claims the instance of its
// providerID; until it has one (CreateFleet returned, status not written
// yet), it also claims the instances tagged with its name. Once it has
// one, another instance tagged with its name is a second launch for it
// (an earlier launch whose answer was lost, with another request) and is
// an orphan like any other.
func (c *Collector) collectInstances(ctx context.Context, log logr.Logger, claims []karpv1.NodeClaim, instances []*karpv1.NodeClaim, now time.Time) map[string]bool {
	launching := map[string]bool{}
	byProviderID := map[string]bool{}
	for i := range claims {
		if id := claims[i].Status.ProviderID; id != "" {
			byProviderID[id] = true
		} else {
			launching[claims[i].Name] = true
		}
	}

	// Each pass keeps a clock only for what still qualifies, so an id
	// that stops qualifying (claimed, gone, deleted) is forgotten.
	live := map[string]bool{}
	orphanSince := map[string]time.Time{}
	terminated := map[string]bool{}
	for _, in := range instances {
		id := in.Status.ProviderID
		live[id] = true
		if byProviderID[id] || (in.Name != "" && launching[in.Name]) {
			continue
		}
		if c.terminated[id] {
			terminated[id] = true // still shutting down
			continue
		}
		first := firstSeen(c.orphanSince, id, now)
		if now.Sub(first) < c.opts.Grace {
			orphanSince[id] = first
			continue
		}
		if err := c.cloud.Delete(ctx, in); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			log.Info("terminating orphaned instance failed; retrying next pass", "providerID", id, "error", err.Error())
			orphanSince[id] = first
			continue
		}
		terminated[id] = true
		log.Info("terminated orphaned instance: no NodeClaim claims it", "providerID", id, "NodeClaim", in.Name,
			"NodePool", in.Labels[karpv1.NodePoolLabelKey], "unclaimedFor", now.Sub(first).Round(time.Second).String())
	}
	c.orphanSince, c.terminated = orphanSince, terminated
	return live
}

// collectNodeClaims deletes the NodeClaims whose instance is not among
// live and, Grace later, a direct Get confirms is gone.
func (c *Collector) collectNodeClaims(ctx context.Context, log logr.Logger, claims []karpv1.NodeClaim, live map[string]bool, now time.Time) {
	goneSince := map[string]time.Time{}
	for i := range claims {
		nc := &claims[i]
		id := nc.Status.ProviderID
		if id == "" || !nc.DeletionTimestamp.IsZero() || live[id] {
			continue
		}
		first := firstSeen(c.goneSince, id, now)
		if now.Sub(first) < c.opts.Grace {
			goneSince[id] = first
			continue
		}
		// Confirm with a direct Get: only NotFound, not an error, counts.
		if _, err := c.cloud.Get(ctx, id); !cloudprovider.IsNodeClaimNotFound(err) {
			goneSince[id] = first
			continue
		}
		log.Info("deleting NodeClaim whose instance is gone", "NodeClaim", nc.Name,
			"NodePool", nc.Labels[karpv1.NodePoolLabelKey], "providerID", id)
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "InstanceTerminated", "instance %s no longer exists; deleting the NodeClaim", id)
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			log.Error(err, "deleting NodeClaim", "NodeClaim", nc.Name)
			goneSince[id] = first
		} else {
			karpentermetrics.NodeClaimDisrupted(nc, karpentermetrics.ReasonGarbageCollected)
		}
	}
	c.goneSince = goneSince
}

// firstSeen returns when an earlier pass first saw id qualify (its entry
// in since), or now for a first sighting. Grace is positive (New), so a
// first sighting never acts.
func firstSeen(since map[string]time.Time, id string, now time.Time) time.Time {
	if t, ok := since[id]; ok {
		return t
	}
	return now
}
