package headtohead

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
)

// Config sets the size and windows of a run; the same for both sides.
type Config struct {
	// Pods is the number of burst pods (500 in the issue).
	Pods int
	// Seed seeds the pod mix and the choice of pods consolidation deletes.
	Seed int64
	// BootDelay is the simulated boot: ec2sim's BootDelay for karpx (after
	// its 200 ms pending time), the KWOKNodeClass's nodeRegistrationDelay
	// for Karpenter.
	BootDelay time.Duration
	// ConsolidationWindow is how long after deleting 70% of the pods the
	// nodes and $/h are counted (2 minutes in the issue).
	ConsolidationWindow time.Duration
	// ConsolidationQuiet is how long, after the ConsolidationWindow, no
	// Node of the burst's NodePool may appear or begin deleting (and every
	// burst pod must be Running) before the consolidation counts as
	// settled; the settled figures compare both sides at the end state
	// they each reach, and the drift then starts from it. 0 skips the
	// wait: drift starts at the window's end.
	ConsolidationQuiet time.Duration
	// Timeout bounds each wait (all pods Running, every node replaced,
	// every NodeClaim gone, the consolidation settled).
	Timeout time.Duration
	// KwokPodWorkers is the kwok controller's pod workers
	// (cluster.Options.KwokPodWorkers) on every side's control plane; 0
	// keeps kwok's 4.
	KwokPodWorkers uint
	// KwokNodeWorkers is the kwok controller's Node workers
	// (cluster.Options.KwokNodeWorkers), which post each Node's Ready, on
	// every side's control plane; 0 keeps kwok's 4.
	KwokNodeWorkers uint
	// Warmup is the least time from the controller's start to the burst,
	// so that the burst finds a controller that has been running, as it
	// does in a cluster: 2 minutes ends karpx's EC2 budget slow start
	// (budget.DefaultAdaptiveRecovery), which exists for a controller that
	// has just restarted. 0 starts the burst as soon as both NodePools are
	// Ready (about a second after the start).
	Warmup time.Duration
}

// consolidationFraction is the share of burst pods consolidation deletes.
const consolidationFraction = 0.7

// pendingLimit is how long a pod may stay Pending during drift before it
// counts as a "long pending" pod (the 60 s).
const pendingLimit = 60 * time.Second

// p5Replicas is the P5 workload's size: three pods, three m5.large nodes.
const p5Replicas = 3

// run is one side's run in progress.
type run struct {
	tb   testing.TB
	ctx  context.Context
	side Autoscaler
	cfg  Config
	c    *cluster.Cluster
	kube client.Client
	rec  *Recorder
	proc Controller
	res  *Results
	// windows are the named time windows of the workloads, for the audit
	// log's per-workload request counts.
	windows []window
}

// window is one workload's time span for the audit log's request counts:
// pods is the number of pods the workload changed (the figure's per-pod
// divisor) and nodesRemoved, when above 0, the nodes the side removed in
// it (a second divisor: see requests).
type window struct {
	name         string
	from, to     time.Time
	pods         int
	nodesRemoved int
	// overlaps is true for a window whose span lies inside another's (the
	// consolidation's fixed window inside the consolidation until
	// settled): the burst-to-zero total counts the larger one only.
	overlaps bool
}

// Run starts a control plane with audit logging of side's controller,
// installs side, runs the five workloads and returns their figures. The
// control plane and the controller stop when tb ends.
func Run(tb testing.TB, side Autoscaler, cfg Config) *Results {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	c := cluster.StartForTestWith(tb, cluster.Options{AuditUsers: []string{side.User()}, KwokPodWorkers: cfg.KwokPodWorkers, KwokNodeWorkers: cfg.KwokNodeWorkers})
	dir := tb.TempDir()
	side.Install(ctx, tb, c, dir, cfg.BootDelay)
	kube, err := client.New(c.RESTConfig, client.Options{Scheme: scheme.New()})
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := NewRecorder(ctx, c.RESTConfig)
	if err != nil {
		tb.Fatal(err)
	}
	r := &run{tb: tb, ctx: ctx, side: side, cfg: cfg, c: c, kube: kube, rec: rec, res: &Results{Side: side.Name()}}
	r.res.LoadAverage = loadAverage()
	for _, np := range []*karpv1.NodePool{NodePool(side.NodeClassRef()), P5NodePool(side.NodeClassRef())} {
		if err := kube.Create(ctx, np); err != nil {
			tb.Fatalf("creating NodePool %s: %v", np.Name, err)
		}
	}
	r.proc = side.Start(tb)
	started := time.Now()
	r.waitFor(2*time.Minute, "both NodePools Ready", func(ctx context.Context) (bool, error) {
		for _, name := range []string{PoolName, P5PoolName} {
			var np karpv1.NodePool
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, &np); err != nil {
				return false, err
			}
			if !np.StatusConditions().Get(status.ConditionReady).IsTrue() {
				return false, nil
			}
		}
		return true, nil
	})
	tb.Logf("%s: NodePools Ready %s after the controller started", side.Name(), time.Since(started).Round(100*time.Millisecond))
	if wait := cfg.Warmup - time.Since(started); wait > 0 {
		tb.Logf("%s: warming up for %s before the burst (-karpx.h2h-warmup %s)", side.Name(), wait.Round(100*time.Millisecond), cfg.Warmup)
		select {
		case <-ctx.Done():
			tb.Fatalf("%s: %v during the warm-up", side.Name(), ctx.Err())
		case <-time.After(wait):
		}
	}
	cpuStart := r.cpu()

	rs := BurstReplicaSets(cfg.Pods, cfg.Seed)
	r.burst(rs)
	remaining := r.consolidation(rs)
	r.drift()
	r.scaleToZero(remaining)
	r.res.add("controller CPU, burst to scale to zero", "s", r.cpu()-cpuStart, "")
	if peak, err := ProcStatusMiB(r.proc.PID(), "VmHWM"); err == nil {
		r.res.add("controller peak RSS (VmHWM)", "MiB", peak, "")
	}
	r.p5()
	r.requests()
	if p, ok := r.proc.(interface{ ErrorLines() map[string]int }); ok {
		byMsg := p.ErrorLines()
		total := 0
		for _, n := range byMsg {
			total += n
		}
		r.res.add("controller log: error lines, whole run", "", float64(total), topRequests(byMsg, 3))
	}
	if p, ok := r.proc.(interface{ ForbiddenLines() []string }); ok {
		if lines := p.ForbiddenLines(); len(lines) > 0 {
			tb.Errorf("%s: requests refused by RBAC (%d), first: %s (add the permission to manifests/)", side.Name(), len(lines), lines[0])
		}
	}
	return r.res
}

func (r *run) cpu() float64 {
	s, err := ProcCPUSeconds(r.proc.PID())
	if err != nil {
		r.tb.Fatalf("%s: reading CPU time: %v (did the controller exit?)", r.side.Name(), err)
	}
	return s
}

// waitFor polls cond every 250 ms until it is true, failing the test after
// timeout.
func (r *run) waitFor(timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	r.tb.Helper()
	if err := wait.PollUntilContextTimeout(r.ctx, 250*time.Millisecond, timeout, true, cond); err != nil {
		r.tb.Fatalf("%s: %s: not true within %s: %v", r.side.Name(), what, timeout, err)
	}
}

// tryWait is waitFor without failing: it returns whether cond came true.
func (r *run) tryWait(timeout time.Duration, cond func(context.Context) (bool, error)) bool {
	return wait.PollUntilContextTimeout(r.ctx, 250*time.Millisecond, timeout, true, cond) == nil
}

// burst creates the burst ReplicaSets and waits until every pod is
// Running.
func (r *run) burst(rs []*appsv1.ReplicaSet) {
	r.tb.Helper()
	before, err := APIServerRequests(r.ctx, r.c.RESTConfig)
	if err != nil {
		r.tb.Fatal(err)
	}
	cpu0 := r.cpu()
	schedBefore, schedErr := SchedulerCounters(r.ctx, r.c.SchedulerMetricsURL())
	var ec2Before map[string]ec2sim.ActionStats
	if sim, ok := r.side.(Simulated); ok {
		ec2Before = sim.Simulator().Stats()
	}
	start := time.Now()
	if err := createAll(r.ctx, r.kube, rs); err != nil {
		r.tb.Fatal(err)
	}
	r.waitFor(r.cfg.Timeout, fmt.Sprintf("all %d burst pods Running", len(rs)), func(context.Context) (bool, error) {
		live, running := r.rec.Snapshot().WorkloadPods("burst")
		return live == len(rs) && running == len(rs), nil
	})
	end := time.Now()
	after, err := APIServerRequests(r.ctx, r.c.RESTConfig)
	if err != nil {
		r.tb.Fatal(err)
	}
	schedAfter, err := SchedulerCounters(r.ctx, r.c.SchedulerMetricsURL())
	if schedErr == nil {
		schedErr = err
	}
	s := r.rec.Snapshot()
	ncByNode := map[string]nodeClaimRecord{}
	var boot []float64
	launched, gone := 0, 0
	for _, nc := range s.NodeClaims {
		if nc.created.Before(start) || nc.nodePool != PoolName {
			continue
		}
		launched++
		if !nc.deleted.IsZero() {
			gone++
		}
		if nc.nodeName != "" {
			ncByNode[nc.nodeName] = nc
		}
	}
	nodes := map[string]nodeRecord{}
	for _, n := range s.Nodes {
		nodes[n.name] = n
	}
	for _, nc := range ncByNode {
		if n, ok := nodes[nc.nodeName]; ok && !n.ready.IsZero() {
			boot = append(boot, n.ready.Sub(nc.created).Seconds())
		}
	}
	var steps Decomposition
	var calls *EC2Calls
	fleetByNode := map[string]time.Time{}
	if sim, ok := r.side.(Simulated); ok {
		instances := sim.Simulator().Instances()
		steps = Decompose(ncByNode, nodes, instances, simPendingDelay)
		for _, in := range instances {
			if in.NodeName != "" {
				fleetByNode[in.NodeName] = in.LaunchTime
			}
		}
		c := ec2Calls(ec2Before, sim.Simulator().Stats())
		calls = &c
	}
	var running, decision, bind, created []float64
	for _, p := range s.Pods {
		if p.workload != "burst" || p.running.IsZero() {
			continue
		}
		running = append(running, p.running.Sub(p.created).Seconds())
		created = append(created, p.created.Sub(start).Seconds())
		if nc, ok := ncByNode[p.nodeName]; ok {
			decision = append(decision, max(0, nc.created.Sub(p.created).Seconds()))
			if n, ok := nodes[p.nodeName]; ok && !n.ready.IsZero() {
				bind = append(bind, p.running.Sub(n.ready).Seconds())
			}
		}
	}
	live := s.LiveNodes(PoolName)
	if len(live) == 0 || len(s.LiveNodes(P5PoolName)) > 0 {
		r.tb.Fatalf("%s: burst pods Running with %d nodes of NodePool %s and %d of %s, want some and none", r.side.Name(), len(live), PoolName, len(s.LiveNodes(P5PoolName)), P5PoolName)
	}
	price, unpriced := nodesPrice(live)
	if len(unpriced) > 0 {
		r.tb.Errorf("%s: nodes of instance types without a price: %v", r.side.Name(), unpriced)
	}
	n := float64(len(rs))
	r.res.add("burst: pending → Running p50", "s", percentile(running, 50), "")
	r.res.add("burst: pending → Running p99", "s", percentile(running, 99), "")
	r.res.add("burst: pending → Running max", "s", percentile(running, 100), "")
	// kube-controller-manager creates the pods of the burst's ReplicaSets
	// over some seconds; each side's batch window waits for the last.
	r.res.add("burst: ReplicaSets created → pod created p50 / max", "s", percentile(created, 50), fmt.Sprintf("max %.2f s", percentile(created, 100)))
	r.res.add("burst: pending → NodeClaim created (decision) p50", "s", percentile(decision, 50), "")
	r.res.add("burst: pending → NodeClaim created (decision) p99", "s", percentile(decision, 99), "")
	r.res.add("burst: NodeClaim created → Node Ready (boot) p50", "s", percentile(boot, 50), "")
	r.res.add("burst: NodeClaim created → Node Ready (boot) max", "s", percentile(boot, 100), "")
	if steps != nil {
		addDecomposition(r.res, steps)
	}
	r.res.add("burst: Node Ready → pod Running (launched nodes) p50", "s", percentile(bind, 50), "")
	r.res.add("burst: Node Ready → pod Running (launched nodes) p99", "s", percentile(bind, 99), "")
	launchedNodes := map[string]bool{}
	for name := range ncByNode {
		launchedNodes[name] = true
	}
	addBindSplit(r.res, SplitBind(s.Pods, nodes, launchedNodes, "burst"))
	if len(fleetByNode) > 0 {
		path, left := PodPath(s.Pods, ncByNode, nodes, fleetByNode, "burst")
		addPodPath(r.res, path, left)
	}
	if schedErr != nil {
		// A diagnostic: its figures are left out, the run goes on.
		r.tb.Logf("%s: no kube-scheduler figures: %v", r.side.Name(), schedErr)
	} else {
		addSchedulerCounters(r.res, schedBefore, schedAfter, float64(len(rs)))
	}
	r.res.add("burst: NodeClaims launched", "", float64(launched), "")
	r.res.add("burst: NodeClaims deleted before every pod Running", "", float64(gone), "")
	r.res.add("burst: nodes", "", float64(len(live)), "")
	r.res.add("burst: $/h launched", "$/h", price, "")
	r.res.add("burst: API server requests per pod, all clients", "", sumRequests(before, after)/n, "")
	if calls != nil {
		addEC2Calls(r.res, *calls, launched, n)
	}
	r.res.add("burst: controller CPU", "s", r.cpu()-cpu0, "")
	if rss, err := ProcStatusMiB(r.proc.PID(), "VmRSS"); err == nil {
		r.res.add("burst: controller RSS at the end", "MiB", rss, "")
	}
	r.windows = append(r.windows, window{name: "burst", from: start, to: end, pods: len(rs)})
	r.tb.Logf("%s: burst of %d pods Running after %s on %d nodes ($%.3f/h)", r.side.Name(), len(rs), end.Sub(start).Round(100*time.Millisecond), len(live), price)
}

// consolidation deletes 70% of the burst ReplicaSets (seeded), waits
// ConsolidationWindow and counts nodes, $/h and evictions. It returns the
// ReplicaSets left.
func (r *run) consolidation(rs []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	r.tb.Helper()
	deleted, rest := pickFraction(rs, consolidationFraction, r.cfg.Seed)
	gone := map[string]bool{}
	for _, d := range deleted {
		gone[d.Name] = true
	}
	s0 := r.rec.Snapshot()
	before := s0.LiveNodes(PoolName)
	start := time.Now()
	if err := deleteAll(r.ctx, r.kube, deleted); err != nil {
		r.tb.Fatal(err)
	}
	select {
	case <-r.ctx.Done():
		r.tb.Fatal(r.ctx.Err())
	case <-time.After(r.cfg.ConsolidationWindow):
	}
	end := time.Now()
	s := r.rec.Snapshot()
	live := s.LiveNodes(PoolName)
	price, _ := nodesPrice(live)
	priceBefore, _ := nodesPrice(before)
	removed, evicted := consolidated(s, live, before, gone, start)
	livePods, running := s.WorkloadPods("burst")
	r.res.add("consolidation: nodes before", "", float64(len(before)), fmt.Sprintf("$%.3f/h", priceBefore))
	r.res.add(fmt.Sprintf("consolidation: nodes %s after deleting 70%% of pods", r.cfg.ConsolidationWindow), "", float64(len(live)), "")
	r.res.add(fmt.Sprintf("consolidation: $/h %s after", r.cfg.ConsolidationWindow), "$/h", price, "")
	perNode := 0.0
	if removed > 0 {
		perNode = float64(evicted) / float64(removed)
	}
	r.res.add("consolidation: pods evicted per node removed", "", perNode, fmt.Sprintf("%d evicted, %d removed", evicted, removed))
	var age string
	if livePods > running {
		age = fmt.Sprintf("oldest created %.1f s before the end", s.OldestNotRunning("burst", end).Seconds())
	}
	r.res.add("consolidation: pods not Running at the end", "", float64(livePods-running), age)
	for _, p := range s.Pods {
		if p.workload == "burst" && p.deleted.IsZero() && p.running.IsZero() {
			r.tb.Logf("%s: consolidation: pod %s (%s) not Running at the end: created %.1f s before, bound %v to %q", r.side.Name(), p.name, p.owner, end.Sub(p.created).Seconds(), !p.bound.IsZero(), p.nodeName)
		}
	}
	// settle's window, when it runs, holds this one.
	r.windows = append(r.windows, window{name: "consolidation", from: start, to: end, pods: len(deleted), nodesRemoved: removed, overlaps: r.cfg.ConsolidationQuiet > 0})
	r.tb.Logf("%s: consolidation: %d → %d nodes, $%.3f → $%.3f/h, %d pods evicted", r.side.Name(), len(before), len(live), priceBefore, price, evicted)
	r.settle(start, before, gone, len(deleted))
	return rest
}

// consolidated returns how many of the Nodes before (the burst's
// NodePool's when the pods were deleted at start) are not in live (s's
// live Nodes of that NodePool), and how many burst pods of the
// ReplicaSets not deleted (gone holds the deleted ones' names) snapshot s
// saw deleted since start: the consolidation's evictions.
func consolidated(s Snapshot, live, before []nodeRecord, gone map[string]bool, start time.Time) (removed, evicted int) {
	for _, b := range before {
		if !slices.ContainsFunc(live, func(n nodeRecord) bool { return n.name == b.name }) {
			removed++
		}
	}
	for _, p := range s.Pods {
		if p.workload == "burst" && !gone[p.owner] && !p.deleted.IsZero() && !p.deleted.Before(start) {
			evicted++
		}
	}
	return removed, evicted
}

// settle carries the consolidation on past its window until it settles
// (see Config.ConsolidationQuiet), bounded by Timeout, and adds the
// figures at that end: seconds from deleting the pods to the last Node
// change, nodes, $/h, pods evicted, and the controller's requests from
// deleting the pods to the settled point (per deleted pod and per node
// removed, see requests). A side whose consolidation is quicker than the
// window removes more nodes inside it, and its requests per pod there
// count that work; at the settled point both sides have done theirs.
func (r *run) settle(start time.Time, before []nodeRecord, gone map[string]bool, deleted int) {
	r.tb.Helper()
	if r.cfg.ConsolidationQuiet <= 0 {
		return
	}
	var last time.Time
	settled := wait.PollUntilContextTimeout(r.ctx, time.Second, r.cfg.Timeout, true, func(context.Context) (bool, error) {
		s := r.rec.Snapshot()
		last = s.LastNodeChange(PoolName, start)
		live, running := s.WorkloadPods("burst")
		return live == running && s.At.Sub(last) >= r.cfg.ConsolidationQuiet, nil
	}) == nil
	end := time.Now()
	s := r.rec.Snapshot()
	live := s.LiveNodes(PoolName)
	price, _ := nodesPrice(live)
	removed, evicted := consolidated(s, live, before, gone, start)
	note := fmt.Sprintf("no Node change for %s after", r.cfg.ConsolidationQuiet)
	if !settled {
		note = fmt.Sprintf("NOT SETTLED within %s of the window's end", r.cfg.Timeout)
	}
	r.res.add("consolidation settled: seconds to the last Node change", "s", last.Sub(start).Seconds(), note)
	r.res.add("consolidation settled: nodes", "", float64(len(live)), "")
	r.res.add("consolidation settled: $/h", "$/h", price, "")
	r.res.add("consolidation settled: pods evicted", "", float64(evicted), fmt.Sprintf("%d nodes removed", removed))
	r.windows = append(r.windows, window{name: "consolidation until settled", from: start, to: end, pods: deleted, nodesRemoved: removed})
	r.tb.Logf("%s: consolidation settled (%s): %d → %d nodes, $%.3f/h, last Node change %.1fs after the pods' deletion, %d pods evicted", r.side.Name(), note, len(before), len(live), price, last.Sub(start).Seconds(), evicted)
}

// drift adds the PodDisruptionBudget, changes the NodePool template
// label and waits until every node is replaced and every pod Running.
func (r *run) drift() {
	r.tb.Helper()
	r.waitFor(r.cfg.Timeout, "every burst pod Running before drift", func(context.Context) (bool, error) {
		live, running := r.rec.Snapshot().WorkloadPods("burst")
		return live == running, nil
	})
	if err := r.kube.Create(r.ctx, BurstPDB()); err != nil {
		r.tb.Fatal(err)
	}
	s0 := r.rec.Snapshot()
	old := map[string]bool{}
	for _, n := range s0.LiveNodes(PoolName) {
		old[n.name] = true
	}
	total, _ := s0.WorkloadPods("burst")
	r.rec.ResetMinReady()
	var np karpv1.NodePool
	if err := r.kube.Get(r.ctx, client.ObjectKey{Name: PoolName}, &np); err != nil {
		r.tb.Fatal(err)
	}
	stored := np.DeepCopy()
	np.Spec.Template.Labels[DriftLabel] = "2"
	start := time.Now()
	if err := r.kube.Patch(r.ctx, &np, client.MergeFrom(stored)); err != nil {
		r.tb.Fatal(err)
	}
	done := r.tryWait(r.cfg.Timeout, func(context.Context) (bool, error) {
		s := r.rec.Snapshot()
		for _, n := range s.LiveNodes(PoolName) {
			if old[n.name] {
				return false, nil
			}
		}
		live, running := s.WorkloadPods("burst")
		return live == running, nil
	})
	end := time.Now()
	s := r.rec.Snapshot()
	replaced := 0
	for name := range old {
		if !slices.ContainsFunc(s.LiveNodes(PoolName), func(n nodeRecord) bool { return n.name == name }) {
			replaced++
		}
	}
	longPending := 0
	for _, p := range s.Pods {
		if p.workload != "burst" {
			continue
		}
		from := maxTime(p.created, start)
		to := end
		if !p.running.IsZero() {
			to = p.running
		}
		if !p.deleted.IsZero() && p.deleted.Before(to) {
			to = p.deleted
		}
		if to.Sub(from) > pendingLimit {
			longPending++
		}
	}
	secs := end.Sub(start).Seconds()
	note := fmt.Sprintf("%d of %d nodes", replaced, len(old))
	if !done {
		note += fmt.Sprintf(", NOT DONE within %s", r.cfg.Timeout)
	}
	r.res.add("drift: seconds until every node is replaced", "s", secs, note)
	r.res.add("drift: lowest Ready pods (PDB maxUnavailable 10%)", "pods", float64(r.rec.MinReady()), fmt.Sprintf("of %d", total))
	r.res.add("drift: pods Pending longer than 60 s", "", float64(longPending), "")
	r.windows = append(r.windows, window{name: "drift", from: start, to: end, pods: total})
	r.tb.Logf("%s: drift: %s in %.1fs, lowest Ready %d of %d", r.side.Name(), note, secs, r.rec.MinReady(), total)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// scaleToZero deletes the PDB and the remaining ReplicaSets and waits until
// the last NodeClaim is gone.
func (r *run) scaleToZero(rest []*appsv1.ReplicaSet) {
	r.tb.Helper()
	if err := r.kube.Delete(r.ctx, BurstPDB()); client.IgnoreNotFound(err) != nil {
		r.tb.Fatal(err)
	}
	start := time.Now()
	if err := deleteAll(r.ctx, r.kube, rest); err != nil {
		r.tb.Fatal(err)
	}
	done := r.tryWait(r.cfg.Timeout, func(context.Context) (bool, error) {
		return r.rec.Snapshot().LiveNodeClaims() == 0, nil
	})
	end := time.Now()
	note := ""
	if !done {
		note = fmt.Sprintf("NOT DONE: %d NodeClaims left after %s", r.rec.Snapshot().LiveNodeClaims(), r.cfg.Timeout)
	}
	r.res.add("scale to zero: seconds until the last NodeClaim is gone", "s", end.Sub(start).Seconds(), note)
	r.windows = append(r.windows, window{name: "scale to zero", from: start, to: end, pods: len(rest)})
	r.tb.Logf("%s: scale to zero in %.1fs %s", r.side.Name(), end.Sub(start).Seconds(), note)
}

// p5 runs the P5 workload: three pods with preferred anti-affinity on a
// WhenEmpty NodePool, scaled to zero, the controller SIGKILLed and started
// again once the nodes are empty; the figure is the time from empty to
// the last node gone.
func (r *run) p5() {
	r.tb.Helper()
	d := P5Deployment(p5Replicas)
	if err := r.kube.Create(r.ctx, d); err != nil {
		r.tb.Fatal(err)
	}
	r.waitFor(r.cfg.Timeout, "P5 pods Running", func(context.Context) (bool, error) {
		live, running := r.rec.Snapshot().WorkloadPods("p5")
		return live == p5Replicas && running == p5Replicas, nil
	})
	nodes := len(r.rec.Snapshot().LiveNodes(P5PoolName))
	stored := d.DeepCopy()
	d.Spec.Replicas = ptr.To[int32](0)
	if err := r.kube.Patch(r.ctx, d, client.MergeFrom(stored)); err != nil {
		r.tb.Fatal(err)
	}
	r.waitFor(time.Minute, "P5 pods gone", func(context.Context) (bool, error) {
		live, _ := r.rec.Snapshot().WorkloadPods("p5")
		return live == 0, nil
	})
	empty := time.Now()
	r.proc.Kill()
	r.proc = r.side.Start(r.tb)
	done := r.tryWait(r.cfg.Timeout, func(context.Context) (bool, error) {
		return len(r.rec.Snapshot().LiveNodes(P5PoolName)) == 0, nil
	})
	note := fmt.Sprintf("%d nodes, consolidateAfter 30s", nodes)
	if !done {
		note += fmt.Sprintf(", NOT DONE: %d nodes left after %s", len(r.rec.Snapshot().LiveNodes(P5PoolName)), r.cfg.Timeout)
	}
	r.res.add("P5: empty → nodes gone, controller restarted", "s", time.Since(empty).Seconds(), note)
	r.tb.Logf("%s: P5: %s in %.1fs", r.side.Name(), note, time.Since(empty).Seconds())
}

// requests reads the audit log and adds the controller's requests per
// workload, without Node creates (see below).
func (r *run) requests() {
	r.tb.Helper()
	reqs, err := ControllerRequests(r.c.AuditLog(), r.side.User())
	if err != nil {
		r.tb.Fatalf("reading the audit log: %v", err)
	}
	if len(reqs) == 0 {
		r.tb.Fatalf("%s: the audit log holds no request of %s", r.side.Name(), r.side.User())
	}
	// Karpenter's kwok provider creates each Node itself, standing in for
	// the kubelet (ec2sim does it for karpx, as the admin); those creates
	// are the simulator's, not the autoscaler's, and are left out.
	var own []Request
	simulated := 0
	for _, q := range reqs {
		if q.Verb == "create" && q.Resource == "nodes" {
			simulated++
			continue
		}
		own = append(own, q)
	}
	if simulated > 0 {
		r.tb.Logf("%s: %d Node creates by the controller's process left out of its requests (the kwok provider's stand-in for the kubelet)", r.side.Name(), simulated)
	}
	reqs = own
	for _, w := range r.windows {
		byKey, total := countRequests(reqs, w.from, w.to)
		per := 0.0
		if w.pods > 0 {
			per = float64(total) / float64(w.pods)
		}
		r.res.add(w.name+": controller API requests per pod", "", per, fmt.Sprintf("%d requests", total))
		if w.nodesRemoved > 0 {
			// Per pod, a side that removes more nodes in the same window
			// counts more requests for the same pods; per node removed
			// tells the cost of each removal apart from how many it made.
			r.res.add(w.name+": controller API requests per node removed", "", float64(total)/float64(w.nodesRemoved),
				fmt.Sprintf("%d nodes removed", w.nodesRemoved))
		}
		r.tb.Logf("%s: %s: controller requests %d: %s", r.side.Name(), w.name, total, topRequests(byKey, 8))
	}
	all, sum := windowsTotal(reqs, r.windows)
	r.res.add("controller API requests, burst to scale to zero, per burst pod", "", float64(sum)/float64(r.cfg.Pods), topRequests(all, 3))
}

// windowsTotal counts reqs over the windows that lie inside no other
// (window.overlaps), each request once, by "verb resource" and in all:
// the requests from the burst to scale to zero.
func windowsTotal(reqs []Request, windows []window) (byKey map[string]int, total int) {
	byKey = map[string]int{}
	for _, w := range windows {
		if w.overlaps {
			continue
		}
		keys, n := countRequests(reqs, w.from, w.to)
		total += n
		for k, v := range keys {
			byKey[k] += v
		}
	}
	return byKey, total
}

// loadAverage returns the 1, 5 and 15 minute load averages
// (/proc/loadavg).
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
