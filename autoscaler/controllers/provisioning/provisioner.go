package provisioning

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ec2v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/scheduling/volumetopology"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
	"github.com/karpx/karpx/autoscaler/state/launchlatency"
	"github.com/karpx/karpx/autoscaler/state/podcache"
	"github.com/karpx/karpx/autoscaler/state/timeouts"
	"github.com/karpx/karpx/autoscaler/trigger"
)

// Options configure the Provisioner.
type Options struct {
	// BatchIdleDuration ends a batch window when no new trigger arrived for
	// this long. Karpenter's default BATCH_IDLE_DURATION is 1s.
	BatchIdleDuration time.Duration
	// BatchMaxDuration ends a batch window at most this long after it
	// opened. Karpenter's default BATCH_MAX_DURATION is 10s.
	BatchMaxDuration time.Duration
	// ResyncPeriod re-runs a pass even without triggers, so a lost watch
	// event cannot leave pods pending. Default 30s.
	ResyncPeriod time.Duration
	// LaunchTTL and RegistrationTTL bound how long pods nominated to a
	// NodeClaim wait for it to launch (since its creation) and to register
	// (since its launch). Defaults 5m and 15m.
	LaunchTTL, RegistrationTTL time.Duration
	// InitializationGrace is the grace window: how long after registration
	// pods nominated to a NodeClaim wait for it to initialise, how long
	// after registration and initialisation startup, ephemeral and agent
	// taints and missing extended resources do not count against a node,
	// and how long a NotReady node still counts. Default 5m.
	InitializationGrace time.Duration
	// MinValuesPolicy is passed to scheduling.Solve: Strict (the default,
	// as Karpenter's --min-values-policy) or BestEffort.
	MinValuesPolicy scheduling.MinValuesPolicy
	// Latency, when set, records when pending pods were first seen and the
	// NodeClaims they were planned onto, for the pod-to-launch histogram
	// (package launchlatency).
	Latency *launchlatency.Tracker
	// Clock times batch windows, the resync ticker, nominations, the grace
	// window and the scheduling histogram. Default clock.RealClock; tests
	// pass a k8s.io/utils/clock/testing fake.
	Clock clock.WithTicker
}

func (o *Options) defaults() {
	timeouts.Default(&o.BatchIdleDuration, time.Second)
	if o.BatchMaxDuration < o.BatchIdleDuration {
		o.BatchMaxDuration = 10 * time.Second
	}
	timeouts.Default(&o.ResyncPeriod, 30*time.Second)
	timeouts.Default(&o.LaunchTTL, timeouts.LaunchTTL)
	timeouts.Default(&o.RegistrationTTL, timeouts.RegistrationTTL)
	timeouts.Default(&o.InitializationGrace, timeouts.InitializationGrace)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Provisioner creates NodeClaims for pending pods. It implements
// manager.Runnable and runs only on the leader.
type Provisioner struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	health   *launchhealth.Tracker
	opts     Options
	// trigger wakes Start and batches its wake-ups into windows.
	trigger *trigger.Trigger
	// clk is Options.Clock.
	clk clock.WithTicker

	nominated  nominations
	agentTaint func(corev1.Taint) bool
}

// NewProvisioner returns a Provisioner. kube must be a cached client of a
// manager whose cache indexes pods by spec.nodeName (see
// clusterstate.IndexFields).
// NodePools whose (NodePool, EC2NodeClass) pair health reports paused are
// skipped until the pause ends.
func NewProvisioner(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, health *launchhealth.Tracker, opts Options) *Provisioner {
	opts.defaults()
	return &Provisioner{kube: kube, cloud: cloud, recorder: recorder, health: health, opts: opts, trigger: trigger.New(opts.Clock), clk: opts.Clock, agentTaint: clusterstate.AgentTaint()}
}

// Trigger asks for a provisioning pass on behalf of key, the object whose
// event caused it (e.g. "pod default/web"); it never blocks, and triggers
// that arrive during a batch window join it. Only the first trigger of each
// key in a window restarts its idle timer (trigger.Trigger.FireFor says
// why).
func (p *Provisioner) Trigger(key string) { p.trigger.FireFor(key) }

// NeedLeaderElection makes the Provisioner run only on the leader.
func (p *Provisioner) NeedLeaderElection() bool { return true }

// Start runs batch windows and passes until ctx is done. It returns nil on
// shutdown; errors of a pass are logged and retried at the next trigger or
// resync.
func (p *Provisioner) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithName("provisioner")
	resync := p.clk.NewTicker(p.opts.ResyncPeriod)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger.C():
		case <-resync.C():
		}
		// Wait until no new object triggered for BatchIdleDuration, or
		// BatchMaxDuration passed.
		if !p.trigger.Batch(ctx, p.opts.BatchIdleDuration, p.opts.BatchMaxDuration) {
			return nil
		}
		start := p.clk.Now()
		res, err := p.Schedule(logr.NewContext(ctx, log))
		if err != nil && ctx.Err() == nil {
			log.Error(err, "provisioning pass failed; retrying at the next trigger")
		}
		if res.Pending > 0 {
			// One line per pass that found work, as Karpenter's "computed
			// new nodeclaim(s) to fit pod(s)": what a burst's timeline is
			// read from.
			log.Info("provisioning pass", "pendingPods", res.Pending, "nodeClaimsCreated", len(res.Created),
				"podsInFlight", res.InFlight, "podsNominated", res.Nominated, "podsUnschedulable", res.Unschedulable,
				"readSeconds", res.Read.Seconds(), "solveSeconds", res.Solve.Seconds(), "createSeconds", res.Create.Seconds(),
				"seconds", p.clk.Since(start).Seconds())
		}
	}
}

// PassResult summarises one provisioning pass.
type PassResult struct {
	// Pending is the number of provisionable pods seen.
	Pending int
	// Created are the names of the NodeClaims created.
	Created []string
	// InFlight is the number of pods expected to land on NodeClaims that
	// are still launching or initialising.
	InFlight int
	// Unschedulable is the number of pods no NodePool can take.
	Unschedulable int
	// Nominated is the number of pending pods left out of the pass because
	// they wait for the in-flight NodeClaim they are nominated to.
	Nominated int
	// Read is how long the pass read the cluster before solving: the
	// pending pods, NodePools, instance types, the cluster snapshot.
	Read time.Duration
	// Solve is how long scheduling.Solve took.
	Solve time.Duration
	// Create is how long the NodeClaims' creation took, until the last
	// create answered (the informer cache wait after it not included).
	Create time.Duration
}

// Schedule runs one provisioning pass from the current cluster state and
// returns what it did. It returns an error when the state cannot be read or
// a NodeClaim cannot be created; pods it could not place get a Warning event
// naming the reason.
func (p *Provisioner) Schedule(ctx context.Context) (PassResult, error) {
	var res PassResult
	passStart := p.clk.Now()
	pending, err := p.pendingPods(ctx)
	res.Pending = len(pending)
	if err != nil || len(pending) == 0 {
		return res, err
	}
	in, typesByPool, err := p.input(ctx, pending)
	if err != nil {
		return res, err
	}
	if len(in.NodePools) == 0 {
		if len(in.UnavailableNodePools) > 0 {
			// Nothing can launch, but the pods learn why.
			p.reportUnschedulable(pending, scheduling.Solve(scheduling.Input{Pods: pending, UnavailableNodePools: in.UnavailableNodePools}), &res)
		}
		return res, errors.New("no NodePool can launch nodes: create a NodePool whose EC2NodeClass resolves")
	}

	now := p.clk.Now()
	state, err := clusterstate.Read(ctx, p.kube)
	if err != nil {
		return res, err
	}
	state.Grace = &clusterstate.Grace{Window: p.opts.InitializationGrace, Now: now, AgentTaint: p.agentTaint}
	// The pending pods were read before the snapshot: one bound since is
	// counted on its node there and must not be planned.
	pending = state.StillUnbound(pending)
	in.ExistingNodes = state.ExistingNodes(typesByPool, nil)
	if in.NamespaceLabels, err = clusterstate.NamespaceLabels(ctx, p.kube, pending, clusterstate.BoundPods(in.ExistingNodes)); err != nil {
		return res, err
	}
	in.Pods, res.Nominated = p.waitForNominations(state, in, pending, now)
	if len(in.Pods) == 0 {
		return res, nil
	}

	solveStart := p.clk.Now()
	res.Read = solveStart.Sub(passStart)
	out := scheduling.Solve(in)
	res.Solve = p.clk.Since(solveStart)
	karpentermetrics.ObserveScheduling(karpentermetrics.ControllerProvisioner, res.Solve)
	p.nominateExisting(state, out, &res)
	p.reportUnschedulable(pending, out, &res)
	createStart := p.clk.Now()
	errs := p.createNodeClaims(ctx, out.NewNodeClaims, &res)
	res.Create = p.clk.Since(createStart)
	// The next pass must see these NodeClaims, or it would provision the
	// same pods again: wait until the informer cache has them.
	if err := p.waitForCache(ctx, res.Created); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// pendingPods returns copies of the provisionable pods in the cache (whose
// own pods are read-only; not a copy of every pod in the cluster per pass)
// and tells the latency tracker which pods are pending now.
func (p *Provisioner) pendingPods(ctx context.Context) ([]*corev1.Pod, error) {
	all, err := podcache.List(ctx, p.kube)
	if err != nil {
		return nil, err
	}
	var pending []*corev1.Pod
	pendingKeys := map[types.NamespacedName]bool{}
	for _, pod := range all {
		if IsProvisionable(pod) {
			pod := pod.DeepCopy()
			pending = append(pending, pod)
			key := client.ObjectKeyFromObject(pod)
			pendingKeys[key] = true
			p.opts.Latency.Seen(key)
		}
	}
	p.opts.Latency.KeepOnly(pendingKeys)
	return pending, nil
}

// input returns the scheduling input of a pass for pending: the DaemonSet
// pods, the pods' volume zones and the NodePools that can launch (with the
// instance types of each, by NodePool name) or cannot and why. Existing
// nodes are added by the caller. It returns list errors.
func (p *Provisioner) input(ctx context.Context, pending []*corev1.Pod) (scheduling.Input, map[string][]*cloudprovider.InstanceType, error) {
	log := logr.FromContextOrDiscard(ctx)
	in := scheduling.Input{Pods: pending, VolumeRequirements: map[types.UID][]corev1.NodeSelectorRequirement{},
		MinValuesPolicy: p.opts.MinValuesPolicy}
	var nodePools karpv1.NodePoolList
	if err := p.kube.List(ctx, &nodePools); err != nil {
		return in, nil, fmt.Errorf("listing NodePools: %w", err)
	}
	var nodeClaims karpv1.NodeClaimList
	if err := p.kube.List(ctx, &nodeClaims); err != nil {
		return in, nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	var err error
	if in.DaemonSetPods, err = clusterstate.DaemonSetPods(ctx, p.kube); err != nil {
		return in, nil, err
	}
	for _, pod := range pending {
		reqs, err := volumetopology.Requirements(ctx, p.kube, pod)
		if err != nil {
			// Planned without its volumes' zones this pass; the next pass reads them again.
			log.Error(err, "reading volume topology", "pod", client.ObjectKeyFromObject(pod))
		}
		if len(reqs) > 0 {
			in.VolumeRequirements[pod.UID] = reqs
		}
	}
	// issue 9: pools skipped for their own state still explain pending
	// pods, their cause first for a pod only they could take.
	unavailable := func(np *karpv1.NodePool, reason string) {
		in.UnavailableNodePools = append(in.UnavailableNodePools, scheduling.UnavailableNodePool{NodePool: np, Reason: reason})
	}
	admit := func(np *karpv1.NodePool) bool {
		if paused, st := p.paused(ctx, np); paused {
			log.V(1).Info("skipping NodePool: provisioning paused after repeated launch failures", "NodePool", np.Name,
				"cause", st.Cause, "until", st.PausedUntil.UTC().Format(time.RFC3339))
			unavailable(np, fmt.Sprintf("provisioning is paused until %s: %s (see its NodeRegistrationHealthy condition)",
				st.PausedUntil.UTC().Format(time.RFC3339), st.String()))
			return false
		}
		// issue 9: a pool whose EC2NodeClass is not Ready is not
		// provisioned from (the NodePool status controller sets
		// NodeClassReady=False with an event naming the cause).
		if cond := np.StatusConditions().Get(karpv1.ConditionTypeNodeClassReady); cond != nil && cond.IsFalse() {
			log.V(1).Info("skipping NodePool: NodeClassReady=False", "NodePool", np.Name, "reason", cond.Reason, "message", cond.Message)
			unavailable(np, "NodeClassReady=False: "+cond.Message)
			return false
		}
		return true
	}
	failed := func(np *karpv1.NodePool, err error) {
		// Transient or persistent, the pool is skipped for this pass
		// only; the next pass asks again. issue 9: only persistent
		// errors (a class that cannot resolve) are warnings; transient
		// ones (data not hydrated yet, throttling, 5xx) are logged.
		var notReady *cloudprovider.NodeClassNotReadyError
		if !errors.As(err, &notReady) {
			log.Info("skipping NodePool for this pass: its instance types are not available yet", "NodePool", np.Name, "transient", true, "error", err.Error())
			return
		}
		log.Error(err, "skipping NodePool: its instance types are not available", "NodePool", np.Name)
		p.recorder.Eventf(np, corev1.EventTypeWarning, "InstanceTypesUnavailable", "instance types not available, NodePool skipped: %v", err)
		unavailable(np, "its instance types are not available: "+err.Error())
	}
	var typesByPool map[string][]*cloudprovider.InstanceType
	in.NodePools, typesByPool = clusterstate.NodePoolInputs(ctx, p.cloud, nodePools.Items, nodeClaims.Items, admit, failed)
	return in, typesByPool, nil
}

// nominateExisting nominates the pods out places on in-flight NodeClaims
// to them (a Nominated event when the nomination is new) and counts them
// in res.
func (p *Provisioner) nominateExisting(state *clusterstate.Snapshot, out scheduling.Result, res *PassResult) {
	for name, pods := range out.ExistingPlacements {
		res.InFlight += len(pods)
		if nc := claimOf(state, name); nc != nil {
			for _, pod := range pods {
				if p.nominated.set(pod.UID, nc.Name) {
					p.recorder.Eventf(pod, corev1.EventTypeNormal, NominatedReason, "Pod should schedule on: nodeclaim/%s", nc.Name)
				}
			}
		}
	}
}

// createWorkers bounds how many NodeClaim creations a pass has in flight
// at once. Karpenter creates a pass's NodeClaims in parallel, one goroutine
// each (workqueue.ParallelizeUntil in Provisioner.CreateNodeClaims,
// pkg/controllers/provisioning/provisioner.go@v1.14.0). A creation's time
// is mostly waiting (the API server's validation and etcd's write, with
// the pass's other requests in between), not the API server's CPU: in the
// 500-pod head-to-head of 2026-11-29 on 2 cores, 100 creations took
// 1.0-1.1 s with 16 in flight and 89 took 0.34 s with all in flight. 128
// keeps a pass of up to 128 NodeClaims to one round trip, and a pass of
// thousands from opening as many requests at once: API Priority and
// Fairness queues what is beyond its share (a ServiceAccount's requests
// go to the workload-low priority level, whose default share of the
// API server's 600 seats is about 245).
const createWorkers = 128

// createNodeClaims creates the planned NodeClaims, up to createWorkers at
// once, those that carry the most pods first, then, in that order,
// nominates their pods to them and records them in res and the latency
// tracker. Creating them one by one made the last NodeClaim of a pass wait
// for every API round trip before it (114 creations in a 500-pod burst);
// with a bounded pool the last ones still wait a few round trips (100
// creations took 1.1 s in the 500-pod head-to-head of 2026-11-29), so the
// order decides which pods wait: a NodeClaim is launched once created, and
// its launch takes its CreateFleet token in creation order too. It returns
// the creation errors, in that order.
func (p *Provisioner) createNodeClaims(ctx context.Context, plans []scheduling.NodeClaimPlan, res *PassResult) []error {
	log := logr.FromContextOrDiscard(ctx)
	plans = slices.Clone(plans)
	slices.SortStableFunc(plans, func(a, b scheduling.NodeClaimPlan) int { return len(b.Pods) - len(a.Pods) })
	claims := make([]*karpv1.NodeClaim, len(plans))
	createErrs := make([]error, len(plans))
	workqueue.ParallelizeUntil(ctx, createWorkers, len(plans), func(i int) {
		claims[i] = plans[i].NodeClaim()
		if err := p.kube.Create(ctx, claims[i]); err != nil {
			createErrs[i] = fmt.Errorf("creating NodeClaim for NodePool %q: %w", plans[i].NodePool.Name, err)
		}
	})
	var errs []error
	for i, plan := range plans {
		nc := claims[i]
		if nc == nil {
			// ParallelizeUntil stopped at ctx's end before this one.
			errs = append(errs, fmt.Errorf("creating NodeClaim for NodePool %q: %w", plan.NodePool.Name, context.Cause(ctx)))
			continue
		}
		if createErrs[i] != nil {
			errs = append(errs, createErrs[i])
			continue
		}
		res.Created = append(res.Created, nc.Name)
		karpentermetrics.NodeClaimCreated(nc, karpentermetrics.ReasonProvisioned)
		if p.opts.Latency != nil {
			keys := make([]types.NamespacedName, len(plan.Pods))
			for i, pod := range plan.Pods {
				keys[i] = client.ObjectKeyFromObject(pod)
			}
			p.opts.Latency.Planned(nc.Name, keys)
		}
		log.Info("created NodeClaim", "NodeClaim", nc.Name, "NodePool", plan.NodePool.Name,
			"pods", len(plan.Pods), "podNames", podNames(plan.Pods, maxLoggedPods), "instanceTypes", len(plan.InstanceTypes),
			"cheapest", plan.InstanceTypes[0].Name, "priceUSDPerHour", plan.PriceUSDPerHour)
		for _, pod := range plan.Pods {
			p.nominated.set(pod.UID, nc.Name)
			p.recorder.Eventf(pod, corev1.EventTypeNormal, NominatedReason, "Pod should schedule on: nodeclaim/%s", nc.Name)
		}
	}
	return errs
}

// maxLoggedPods is how many pods a "created NodeClaim" line names.
const maxLoggedPods = 5

// podNames returns "namespace/name" of the first limit pods, comma-separated,
// with "and N more" when there are more.
func podNames(pods []*corev1.Pod, limit int) string {
	names := make([]string, 0, min(len(pods), limit))
	for _, pod := range pods[:min(len(pods), limit)] {
		names = append(names, pod.Namespace+"/"+pod.Name)
	}
	out := strings.Join(names, ", ")
	if len(pods) > limit {
		out += fmt.Sprintf(" and %d more", len(pods)-limit)
	}
	return out
}

// waitForNominations returns the pending pods to plan: those nominated to
// an in-flight NodeClaim whose nomination still holds (NominationHolds)
// and that still fit on it beside what kube-scheduler bound there
// (stillFits) are left out, and their requests are reserved on that NodeClaim's entry
// in in.ExistingNodes so no other pod is planned into their room. It also
// returns how many pods it left out.
func (p *Provisioner) waitForNominations(state *clusterstate.Snapshot, in scheduling.Input, pending []*corev1.Pod, now time.Time) ([]*corev1.Pod, int) {
	p.nominated.keepOnly(pending)
	plan := make([]*corev1.Pod, 0, len(pending))
	waiting := 0
	for _, pod := range pending {
		if name := p.nominated.get(pod.UID); name != "" {
			nc := state.NodeClaims[name]
			if NominationHolds(nc, now, p.opts.LaunchTTL, p.opts.RegistrationTTL, p.opts.InitializationGrace) &&
				stillFits(in, state, nc, pod) && state.Reserve(in.ExistingNodes, nc, pod) {
				waiting++
				continue
			}
			p.nominated.forget(pod.UID)
		}
		plan = append(plan, pod)
	}
	return plan, waiting
}

func (p *Provisioner) waitForCache(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			var nc karpv1.NodeClaim
			if err := p.kube.Get(ctx, types.NamespacedName{Name: n}, &nc); err != nil {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	})
}

// paused reports whether launches for np's (NodePool, EC2NodeClass) pair
// are paused after repeated failures.
func (p *Provisioner) paused(ctx context.Context, np *karpv1.NodePool) (bool, launchhealth.State) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || p.health == nil {
		return false, launchhealth.State{}
	}
	var class ec2v1.EC2NodeClass
	if err := p.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, &class); err != nil {
		return false, launchhealth.State{}
	}
	return p.health.Paused(launchhealth.Key{NodePool: np.Name, NodeClass: class.Name},
		launchhealth.Generations{NodePool: np.Generation, NodeClass: class.Generation})
}

// reportUnschedulable records a FailedProvisioning Warning event on every
// pending pod out could not place, with the reasons of every NodePool
// (the NodePools the pod could run on first), and counts them in res.
func (p *Provisioner) reportUnschedulable(pending []*corev1.Pod, out scheduling.Result, res *PassResult) {
	for _, pod := range pending {
		if err, ok := out.Unschedulable[pod.UID]; ok {
			res.Unschedulable++
			p.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedProvisioning", "karpx cannot launch a node for this pod: %v", err)
		}
	}
}
