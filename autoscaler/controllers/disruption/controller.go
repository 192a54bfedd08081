package disruption

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/scheduling/volumetopology"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	podset "github.com/karpx/karpx/autoscaler/state/pods"
	"github.com/karpx/karpx/autoscaler/state/timeouts"
	"github.com/karpx/karpx/autoscaler/trigger"
)

// Options configure the Controller.
type Options struct {
	// Period is the longest time between two passes. Default 10 s.
	Period time.Duration
	// ReplacementTimeout is how long a replacement NodeClaim may take to
	// become Initialized before the command is abandoned (the replacement
	// deleted, the old node untainted). Default 20 min: Karpenter's
	// registration TTL (15 min) plus time to initialise. It also bounds
	// how long an Initialized replacement of a consolidation command waits
	// for other pods to land before its old node is drained (see progress).
	ReplacementTimeout time.Duration
	// MaxMultiNodeCandidates caps how many nodes one multi-node
	// consolidation considers at once. Default 100, as Karpenter.
	MaxMultiNodeCandidates int
	// Logger receives the controller's logs when the context passed to
	// Start carries none (the manager starts runnables on a bare context).
	Logger logr.Logger
	// MinValuesPolicy is passed to the consolidation simulation's
	// scheduling.Solve, so consolidation plans replacements as
	// provisioning would: Strict (default) or BestEffort.
	MinValuesPolicy scheduling.MinValuesPolicy
	// InitializationGrace is the grace window through which a pass sees
	// the nodes pending pods are expected to land on (see nominated): the
	// operator's --initialization-grace-window, the one provisioning plans
	// with. Default 5 min, as the flag's.
	InitializationGrace time.Duration
	// SpotToSpotConsolidation lets consolidation replace spot nodes with a
	// spot node, under Karpenter's rule (spotToSpot). Karpenter's feature
	// gate of the same name, off by default as in Karpenter v1.14
	// (pkg/operator/options/options.go): spot nodes are then only deleted
	// or replaced by on-demand.
	SpotToSpotConsolidation bool
}

func (o *Options) defaults() {
	timeouts.Default(&o.Period, 10*time.Second)
	timeouts.Default(&o.ReplacementTimeout, 20*time.Minute)
	if o.MaxMultiNodeCandidates <= 0 {
		o.MaxMultiNodeCandidates = 100
	}
	timeouts.Default(&o.InitializationGrace, timeouts.InitializationGrace)
}

// Controller runs disruption passes. It implements manager.Runnable and
// runs only on the leader.
type Controller struct {
	kube     client.Client
	reader   client.Reader // uncached, for the last check before acting
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.WithTickerAndDelayedExecution
	opts     Options
	// trigger wakes Start for a pass.
	trigger *trigger.Trigger
	// podEvents is the PodEvents controller Register adds beside this one
	// (nil until then): consolidateAfter counts from the newest pod event
	// it has seen, even one not yet written to lastPodEventTime.
	podEvents *PodEvents

	mu    sync.Mutex
	timer clock.Timer

	// metricsMu guards poolsWithGauges: the NodePools whose budget gauges
	// the last pass set (recordPassMetrics).
	metricsMu       sync.Mutex
	poolsWithGauges map[string]bool
	// poolBlockedAt is when each NodePool's DisruptionBlocked event was
	// last emitted, by NodePool UID and reason (budgetBlocked); guarded by
	// metricsMu.
	poolBlockedAt map[string]time.Time
}

// New returns a Controller. kube is the manager's cached client; reader an
// uncached one (mgr.GetAPIReader()) used to re-read a node's pods right
// before it is disrupted.
func New(kube client.Client, reader client.Reader, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.WithTickerAndDelayedExecution, opts Options) *Controller {
	opts.defaults()
	return &Controller{kube: kube, reader: reader, cloud: cloud, recorder: recorder, clock: clk, opts: opts, trigger: trigger.New(clk)}
}

// Trigger asks for a pass soon; it never blocks, and triggers that arrive
// during a pass fold into one more pass.
func (c *Controller) Trigger() { c.trigger.Fire() }

// NeedLeaderElection makes the Controller run only on the leader.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs passes until ctx is done: at once, then on every Period, trigger and timer. Errors of a pass are logged and
// the pass is retried at the next tick.
func (c *Controller) Start(ctx context.Context) error {
	log, err := logr.FromContext(ctx)
	if err != nil {
		log = c.opts.Logger
	}
	log = log.WithName("disruption")
	ctx = logr.NewContext(ctx, log)
	tick := c.clock.NewTicker(c.opts.Period)
	defer tick.Stop()
	c.Trigger()
	for {
		select {
		case <-ctx.Done():
			c.mu.Lock()
			if c.timer != nil {
				c.timer.Stop()
			}
			c.mu.Unlock()
			return nil
		case <-tick.C():
		case <-c.trigger.C():
		}
		if _, err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			if onlyConflicts(err) {
				// Another writer changed a Node or NodeClaim since the
				// cache's copy (kube-controller-manager, the kubelet):
				// not a failure; the next pass (that change's watch
				// event, or the tick) reads the new copy, as Karpenter's
				// controllers requeue on a conflict.
				log.V(1).Info("an object changed since the cache's copy; retrying at the next pass", "error", err.Error())
				continue
			}
			log.Error(err, "disruption pass failed; retrying at the next tick")
		}
	}
}

// onlyConflicts reports whether err is a 409 Conflict from the API server,
// or a join (errors.Join) of nothing else.
func onlyConflicts(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyConflicts(e) {
				return false
			}
		}
		return len(joined.Unwrap()) > 0
	}
	return apierrors.IsConflict(err)
}

// wakeAt arranges a pass at t (the next NodeClaim becoming consolidatable).
func (c *Controller) wakeAt(t time.Time) {
	if t.IsZero() {
		return
	}
	d := t.Sub(c.clock.Now())
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timer = c.clock.AfterFunc(d+100*time.Millisecond, c.Trigger)
}

// state is the cluster as one pass sees it.
type state struct {
	now        time.Time
	cluster    *clusterstate.Snapshot
	pools      map[string]*karpv1.NodePool
	poolInputs []scheduling.NodePoolInput
	types      map[string][]*cloudprovider.InstanceType
	daemonSets []*corev1.Pod
	pdbs       []policyv1.PodDisruptionBudget
	candidates []*candidate
	// volumes are the zone requirements of candidates' pods from their
	// volumes (bound PersistentVolumes, WaitForFirstConsumer classes).
	volumes map[types.UID][]corev1.NodeSelectorRequirement
	// namespaces are the Namespaces' labels, when a pod's affinity term
	// has a namespaceSelector (clusterstate.NamespaceLabels).
	namespaces map[string]map[string]string
	// disrupting counts, per NodePool, NodeClaims being deleted or
	// waiting for their replacements.
	disrupting map[string]int
	// total counts, per NodePool, all its NodeClaims (budgets' percentages
	// are of this).
	total map[string]int
	// moving names a pod moving between nodes now ("" when none), which
	// holds consolidation (see moving).
	moving string
}

// PassResult summarises one pass, for tests and logs.
type PassResult struct {
	// Decisions are the commands started, as "method/decision: names".
	Decisions []string
	// Candidates is the number of Initialized NodeClaims looked at.
	Candidates int
}

// Pass runs one disruption pass from the current cluster state: it moves
// replacement-first commands along, keeps the Consolidatable and Drifted
// conditions, deletes expired NodeClaims (forced, see expire), then tries
// interruption (forced, see interruption), emptiness, drift, multi-node and
// single-node consolidation in that order and starts the first command
// one of them finds (emptiness may cover many nodes). It returns an error
// when the state cannot be read or a command cannot be started.
func (c *Controller) Pass(ctx context.Context) (PassResult, error) {
	var res PassResult
	s, err := c.read(ctx)
	if err != nil {
		return res, err
	}
	res.Candidates = len(s.candidates)
	if err := c.progress(ctx, s); err != nil {
		return res, err
	}
	if err := c.releaseOrphanedTaints(ctx, s); err != nil {
		return res, err
	}
	if err := c.markConditions(ctx, s); err != nil {
		return res, err
	}
	c.recordPassMetrics(s)
	nextExpiry, err := c.expire(ctx, s)
	if err != nil {
		return res, err
	}
	// Karpenter v1.14's order after interruption: emptiness, drift,
	// multi-node and single-node consolidation (NewMethods,
	// pkg/controllers/disruption/controller.go@v1.14.3), so an empty
	// drifted node is deleted as Empty.
	for _, method := range []func(context.Context, *state) (*command, error){c.interruption, c.emptiness, c.drift, c.multiNodeConsolidation, c.singleNodeConsolidation} {
		cmd, err := method(ctx, s)
		if err != nil {
			return res, err
		}
		if cmd == nil {
			continue
		}
		started, err := c.execute(ctx, s, cmd)
		if err != nil {
			return res, err
		}
		if !started && cmd.method == MethodInterruption {
			// Pods moved since the decision: interruption cannot wait
			// for the period, decide again at once.
			c.Trigger()
		}
		if started {
			res.Decisions = append(res.Decisions, cmd.String())
			// The next pass must see this command, or it would decide it
			// again: wait until the informer cache shows it.
			if err := c.waitForCache(ctx, cmd); err != nil {
				return res, err
			}
			c.Trigger() // there may be more to do in the next pass
			break
		}
	}
	// Wake up when the next NodeClaim expires or becomes consolidatable.
	next := nextExpiry
	for _, cand := range s.candidates {
		if at := cand.consolidatableAt; !at.IsZero() && at.After(s.now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	// And when an interrupted node must be drained whatever its
	// replacements' state.
	for _, nc := range s.cluster.NodeClaims {
		if at := drainBy(nc); interrupted(nc) && nc.DeletionTimestamp.IsZero() && at.After(s.now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	c.wakeAt(next)
	return res, nil
}

// read builds the pass's state from the cache.
func (c *Controller) read(ctx context.Context) (*state, error) {
	s := &state{now: c.clock.Now(), pools: map[string]*karpv1.NodePool{},
		disrupting: map[string]int{}, total: map[string]int{}, volumes: map[types.UID][]corev1.NodeSelectorRequirement{}}
	var err error
	if s.cluster, err = clusterstate.Read(ctx, c.kube); err != nil {
		return nil, err
	}
	var pools karpv1.NodePoolList
	if err := c.kube.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.kube.List(ctx, &pdbs); err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	s.pdbs = pdbs.Items
	if s.daemonSets, err = clusterstate.DaemonSetPods(ctx, c.kube); err != nil {
		return nil, err
	}
	bound := make([]*corev1.Pod, 0, len(s.cluster.Pods))
	for _, pods := range s.cluster.Pods {
		bound = append(bound, pods...)
	}
	if s.namespaces, err = clusterstate.NamespaceLabels(ctx, c.kube, bound, s.cluster.Unbound); err != nil {
		return nil, err
	}
	claims := make([]karpv1.NodeClaim, 0, len(s.cluster.NodeClaims))
	for _, nc := range s.cluster.NodeClaims {
		claims = append(claims, *nc)
	}
	for i := range pools.Items {
		s.pools[pools.Items[i].Name] = &pools.Items[i]
	}
	log := logr.FromContextOrDiscard(ctx)
	s.poolInputs, s.types = clusterstate.NodePoolInputs(ctx, c.cloud, pools.Items, claims, nil, func(np *karpv1.NodePool, err error) {
		// Without its instance types a pool can neither price its
		// nodes nor launch replacements; its nodes are left alone.
		log.V(1).Info("NodePool skipped: instance types not available", "NodePool", np.Name, "error", err.Error())
	})
	replacing := s.count()
	c.addCandidates(ctx, s, replacing)
	s.moving = moving(s)
	return s, nil
}

// count fills s.total and s.disrupting from the NodeClaims and returns the
// NodeClaims some live NodeClaim replaces. A NodeClaim whose instance is
// already terminating (InstanceTerminating=True: drained, the
// TerminateInstances call made) counts neither way, as in Karpenter's
// BuildDisruptionBudgetMapping (pkg/controllers/disruption/helpers.go@v1.14.3):
// with budget nodes "1" the next node's disruption starts once the
// previous one is drained, not once its instance is gone.
func (s *state) count() map[string]bool {
	replacing := map[string]bool{}
	for _, nc := range s.cluster.NodeClaims {
		pool := nc.Labels[karpv1.NodePoolLabelKey]
		if !nc.StatusConditions().Get(karpv1.ConditionTypeInstanceTerminating).IsTrue() {
			s.total[pool]++
			if !nc.DeletionTimestamp.IsZero() || nc.Annotations[ReplacementsAnnotationKey] != "" {
				s.disrupting[pool]++
			}
		}
		// A replacement stays out of reach until the node it replaces is
		// completely gone: while that one drains, the replacement looks
		// empty but its pods are on their way.
		for _, n := range splitNames(nc.Annotations[ReplacementsAnnotationKey]) {
			replacing[n] = true
		}
	}
	return replacing
}

// addCandidates adds to s, in name order, the Initialized NodeClaims that
// may be disrupted: with a Node, a NodePool whose instance types are known,
// not being deleted, replaced or replacing, not interrupted, and no
// pending pod expected on their Node. Each gets its reschedulable pods,
// price, blockers and the volume zones of its pods (s.volumes).
func (c *Controller) addCandidates(ctx context.Context, s *state, replacing map[string]bool) {
	nominated := c.nominated(s)
	for _, name := range slices.Sorted(maps.Keys(s.cluster.NodeClaims)) {
		nc := s.cluster.NodeClaims[name]
		pool, types := s.pools[nc.Labels[karpv1.NodePoolLabelKey]], s.types[nc.Labels[karpv1.NodePoolLabelKey]]
		node := s.cluster.NodeOf(nc)
		if pool == nil || types == nil || node == nil || !nc.DeletionTimestamp.IsZero() || !node.DeletionTimestamp.IsZero() ||
			nc.Annotations[ReplacementsAnnotationKey] != "" || replacing[nc.Name] || nominated[node.Name] || interrupted(nc) ||
			!nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			continue
		}
		pods := s.cluster.Pods[node.Name]
		cand := &candidate{nc: nc, node: node, pool: pool, pods: reschedulable(pods),
			price: priceOf(types, node.Labels), consolidatableAt: consolidatableAt(nc, pool, c.podEvents.Newest(node.Name))}
		cand.blocked, cand.blockedByPods = blockedBy(nc, node, cand.pods, s.pdbs, s.now)
		for _, p := range cand.pods {
			if _, _, err := podset.DoNotDisruptActive(p, s.now); err != nil {
				c.invalidDoNotDisrupt(p, err)
			}
		}
		for _, p := range cand.pods {
			if why := scheduling.Unsupported(p); why != "" {
				cand.unmodelled = fmt.Sprintf("pod %s/%s: %s", p.Namespace, p.Name, why)
				break
			}
		}
		s.candidates = append(s.candidates, cand)
		for _, p := range cand.pods {
			reqs, err := volumetopology.Requirements(ctx, c.kube, p)
			if err != nil {
				// A pod whose volumes cannot be read cannot be moved
				// safely.
				cand.unmodelled = fmt.Sprintf("pod %s/%s: volume topology unknown: %v", p.Namespace, p.Name, err)
				continue
			}
			if len(reqs) > 0 {
				s.volumes[p.UID] = reqs
			}
		}
	}
}

// nominated returns the Nodes that pods not bound yet are expected to land
// on: the scheduler places every pending pod on the existing nodes (as
// provisioning would, through the same grace window,
// Options.InitializationGrace: startup, ephemeral and agent taints of a
// node younger than it do not keep its pending pods away) and a Node that
// takes one is no candidate, however empty it looks. Without this a node that has just initialised for pods
// kube-scheduler has not bound yet would be removed as empty. The pods of
// nodes that are leaving (leaving) count as pending: a node they will
// move to is no candidate either.
func (c *Controller) nominated(s *state) map[string]bool {
	pending := leaving(s)
	for _, p := range s.cluster.Unbound {
		if podset.Reschedulable(p) {
			pending = append(pending, p)
		}
	}
	out := map[string]bool{}
	if len(pending) == 0 {
		return out
	}
	// Seen as provisioning sees them: a node that has just initialised but
	// still carries an agent's taint is where its pending pods will go.
	s.cluster.Grace = &clusterstate.Grace{Window: c.opts.InitializationGrace, Now: s.now, AgentTaint: clusterstate.AgentTaint()}
	existing := s.cluster.ExistingNodes(s.types, nil)
	s.cluster.Grace = nil
	res := scheduling.Solve(scheduling.Input{Pods: pending, ExistingNodes: existing, NamespaceLabels: s.namespaces})
	for name := range res.ExistingPlacements {
		out[name] = true
	}
	return out
}

// waitForCache waits (at most 10 s) until the cache shows every candidate
// of cmd deleted or carrying its replacements.
func (c *Controller) waitForCache(ctx context.Context, cmd *command) error {
	claims := make([]*karpv1.NodeClaim, len(cmd.candidates))
	for i, cand := range cmd.candidates {
		claims[i] = cand.nc
	}
	return c.waitUntilCached(ctx, claims, func(nc *karpv1.NodeClaim) bool {
		return !nc.DeletionTimestamp.IsZero() || nc.Annotations[ReplacementsAnnotationKey] != ""
	})
}

// waitForDeletion waits (at most 10 s) until the cache shows nc being
// deleted or gone, so that the next pass sees its pods moving.
func (c *Controller) waitForDeletion(ctx context.Context, nc *karpv1.NodeClaim) error {
	return c.waitUntilCached(ctx, []*karpv1.NodeClaim{nc}, func(nc *karpv1.NodeClaim) bool { return !nc.DeletionTimestamp.IsZero() })
}

// waitUntilCached polls the cache every 20 ms, for at most 10 s, until
// each of claims is gone or its cached copy satisfies done. It returns the
// cache's read error or the timeout's.
func (c *Controller) waitUntilCached(ctx context.Context, claims []*karpv1.NodeClaim, done func(*karpv1.NodeClaim) bool) error {
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, want := range claims {
			var nc karpv1.NodeClaim
			if err := c.kube.Get(ctx, client.ObjectKeyFromObject(want), &nc); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return false, err
			}
			if !done(&nc) {
				return false, nil
			}
		}
		return true, nil
	})
}

// allowed returns how many more nodes of pool the budgets let a command
// with reason disrupt now.
func (c *Controller) allowed(s *state, pool *karpv1.NodePool, reason string) int {
	n := pool.MustGetAllowedDisruptions(c.clock, s.total[pool.Name], karpv1.DisruptionReason(reason)) - s.disrupting[pool.Name]
	if n < 0 {
		return 0
	}
	return n
}

func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
