package upstream

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// The differential tests (TestDifferential*, `make differential`) run one
// scenario twice, at the same time: on karpx (karpx-controller under
// manifests/controller's RBAC) and on the real Karpenter AWS provider
// (bin/karpenter-aws under its chart's RBAC), each on a control plane and
// an ec2sim of its own with the same settings, manifests and workload.
// Each side records what its autoscaler decided (diffRecorder); the test
// then compares the two records, normalised to what does not depend on
// timing or generated names: which nodes (named by the pods they held)
// were disrupted, in what order, with which reason, whether they were
// replaced, and in which order their pods were evicted. The reference is
// what Karpenter did in the same run; the accepted differences are listed
// in docs/karpenter-differences.md.

// Sides of a differential scenario.
const (
	sideKarpx     = "karpx"
	sideKarpenter = "Karpenter"
)

// diffSides are both sides, karpx first.
var diffSides = []string{sideKarpx, sideKarpenter}

// diffHoldTaint keeps pods off a node while a scenario lays out its nodes
// (both autoscalers and kube-scheduler honour it; neither disrupts for
// it); removed before the decisions are watched.
var diffHoldTaint = corev1.Taint{Key: "karpx.io/diff-hold", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// diffEnv is one side of a differential scenario: a control plane and its
// ec2sim with karpx or Karpenter running on them.
type diffEnv struct {
	problemEnv
	side string
	rec  *diffRecorder
}

// runDiff runs scenario on both sides in parallel subtests (each with its
// own control plane, ec2sim and autoscaler; timeout bounds each side's
// calls) and returns each side's result by side, once both are done. It
// fails t when either side failed: there is nothing to compare then.
func runDiff[R any](t *testing.T, timeout time.Duration, scenario func(e *diffEnv) R) map[string]R {
	t.Helper()
	if testing.Short() {
		t.Skip("needs real control planes and bin/karpenter-aws; skipped with -short")
	}
	var mu sync.Mutex
	out := map[string]R{}
	t.Run("sides", func(t *testing.T) {
		for _, side := range diffSides {
			t.Run(side, func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				e := startDiffEnv(t, side, timeout)
				r := scenario(e)
				e.rec.stop()
				mu.Lock()
				out[side] = r
				mu.Unlock()
				t.Logf("%s: scenario took %s (including its control plane's start)", side, time.Since(start).Round(time.Second))
			})
		}
	})
	if t.Failed() || len(out) != len(diffSides) {
		t.FailNow()
	}
	return out
}

// startDiffEnv starts, for t, a control plane, an ec2sim with its default
// settings (the same on both sides) and side's autoscaler: Karpenter as
// StartAWSForTest starts it, karpx as TestMigrationFromKarpenterAWS does
// (startKarpx, after installing manifests/crds), and the EC2NodeClass
// "default" (AL2023). The env's context ends after timeout or with t.
func startDiffEnv(t *testing.T, side string, timeout time.Duration) *diffEnv {
	t.Helper()
	start := time.Now()
	env, endpoint := startSimEnv(t, timeout)
	e := &diffEnv{side: side, problemEnv: problemEnv{awsEnv: *env, endpoint: endpoint}}
	c, ctx := e.cluster, e.ctx
	kube, ok := e.kube.(client.WithWatch)
	if !ok {
		t.Fatalf("startSimEnv's client %T cannot watch", e.kube)
	}
	switch side {
	case sideKarpenter:
		opts := AWSOptions{Endpoint: endpoint, Workdir: t.TempDir()}
		e.k = StartAWSForTest(t, c, opts)
	case sideKarpx:
		if err := c.InstallCRDs(ctx, filepath.Join(e.root, "manifests", "crds")); err != nil {
			t.Fatal(err)
		}
		e.startKarpx()
	default:
		t.Fatalf("unknown side %q", side)
	}
	e.apply(EC2NodeClassYAML("default", c.Name, "al2023@latest"))
	e.rec = newDiffRecorder(ctx, t, kube)
	t.Logf("%s: control plane, ec2sim and autoscaler ready in %s", side, time.Since(start).Round(time.Millisecond))
	return e
}

// diffPool is an on-demand NodePool of EC2NodeClass default that launches
// only instanceType, with consolidation off (consolidateAfter Never,
// WhenEmptyOrUnderutilized), budget 100%: a scenario sets what it tests.
func diffPool(name, instanceType string) *karpv1.NodePool {
	np := problemPool(name, "default", []string{instanceType}, map[string]string{"diff": name})
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	return np
}

// hold adds (on) or removes diffHoldTaint on every Node of pool.
func (e *diffEnv) hold(pool string, on bool) {
	e.t.Helper()
	var nodes corev1.NodeList
	if err := e.kube.List(e.ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		e.t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == diffHoldTaint.Key })
		if on {
			n.Spec.Taints = append(n.Spec.Taints, diffHoldTaint)
		}
		if err := e.kube.Patch(e.ctx, n, patch); err != nil {
			// A conflict with the autoscaler's own write: read the Node
			// again and retry.
			time.Sleep(100 * time.Millisecond)
			if e.ctx.Err() != nil {
				e.t.Fatal(err)
			}
			e.hold(pool, on)
			return
		}
	}
}

// waitPods waits until app has n Running pods and every NodeClaim of pool
// is Initialized.
func (e *diffEnv) waitPods(pool, namespace, app string, n int) {
	e.t.Helper()
	e.eventually(3*time.Minute, fmt.Sprintf("%d %s pods Running on Initialized NodeClaims", n, app), func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app": app}); err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				running++
			}
		}
		claims, err := e.claimsOf(ctx, pool)
		if err != nil || running != n || len(claims) == 0 {
			return false, nil
		}
		for i := range claims {
			if !conditionTrue(&claims[i], karpv1.ConditionTypeInitialized) {
				return false, nil
			}
		}
		return true, nil
	})
}

// until polls cond every second until it holds (true) or limit passes
// (false).
func (e *diffEnv) until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Second)
	}
}

// roles names each live NodeClaim of pool by the apps of the pods on its
// Node ("a+b", sorted; "-" for none), the name both sides share.
func (e *diffEnv) roles(pool string) map[string]string {
	e.t.Helper()
	claims, err := e.claimsOf(e.ctx, pool)
	if err != nil {
		e.t.Fatal(err)
	}
	var pods corev1.PodList
	if err := e.kube.List(e.ctx, &pods); err != nil {
		e.t.Fatal(err)
	}
	apps := map[string][]string{}
	for _, p := range pods.Items {
		if app := p.Labels["app"]; app != "" && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			apps[p.Spec.NodeName] = append(apps[p.Spec.NodeName], app)
		}
	}
	out := map[string]string{}
	for _, nc := range claims {
		a := apps[nc.Status.NodeName]
		sort.Strings(a)
		out[nc.Name] = "-"
		if len(a) > 0 {
			out[nc.Name] = strings.Join(a, "+")
		}
	}
	return out
}

// claimRecord is what a side's recorder saw of one NodeClaim.
type claimRecord struct {
	// Name, Node and InstanceType as first seen.
	Name, Node, InstanceType string
	// Seen is when the recorder first saw it; Deleting when it first
	// saw its deletionTimestamp; Gone when it first missed it; Tainted
	// when it first saw its Node tainted karpenter.sh/disrupted;
	// Terminating when it first saw InstanceTerminating=True (drained,
	// the instance's termination requested). Zero when never.
	Seen, Deleting, Gone, Tainted, Terminating time.Time
	// Drifted and DisruptionReason are the reasons of those conditions
	// when last seen True ("" when never).
	Drifted, DisruptionReason string
	// ReplacementFor is true for a NodeClaim created while another was
	// disrupted and not yet gone (a replacement launched first).
	ReplacementFor bool
}

// podRecord is what a side's recorder saw of one pod: the order (Seq,
// from 1) in which pods were first seen leaving (deletionTimestamp set or
// deleted), and when.
type podRecord struct {
	Seq     int
	Leaving time.Time
	// Node is the pod's spec.nodeName, App its "app" label.
	Node, App string
}

// diffRecorder polls a side's NodeClaims and Nodes every 200 ms and
// watches its pods and its NodeClaims' DisruptionReason, keeping what a
// comparison needs: claimRecords and the order in which pods left.
type diffRecorder struct {
	t    testing.TB
	kube client.WithWatch
	mu   sync.Mutex
	// claims by NodeClaim name.
	claims map[string]*claimRecord
	// pods by "namespace/name".
	pods   map[string]*podRecord
	seq    int
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func newDiffRecorder(ctx context.Context, t testing.TB, kube client.WithWatch) *diffRecorder {
	ctx, cancel := context.WithCancel(ctx)
	r := &diffRecorder{t: t, kube: kube, claims: map[string]*claimRecord{}, pods: map[string]*podRecord{}, cancel: cancel}
	r.done.Add(3)
	go func() {
		defer r.done.Done()
		for ctx.Err() == nil {
			r.poll(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	go func() { defer r.done.Done(); r.watchPods(ctx) }()
	go func() { defer r.done.Done(); r.watchReasons(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// stop ends the recording (idempotent).
func (r *diffRecorder) stop() { r.cancel(); r.done.Wait() }

func (r *diffRecorder) poll(ctx context.Context) {
	var claims karpv1.NodeClaimList
	var nodes corev1.NodeList
	if r.kube.List(ctx, &claims) != nil || r.kube.List(ctx, &nodes) != nil {
		return
	}
	now := time.Now()
	tainted := map[string]bool{}
	for _, n := range nodes.Items {
		tainted[n.Name] = slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey })
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	live := map[string]bool{}
	var added []*claimRecord
	for i := range claims.Items {
		nc := &claims.Items[i]
		live[nc.Name] = true
		rec := r.claims[nc.Name]
		if rec == nil {
			rec = &claimRecord{Name: nc.Name, Seen: now}
			r.claims[nc.Name] = rec
			added = append(added, rec)
		}
		if rec.Node == "" {
			rec.Node = nc.Status.NodeName
		}
		if rec.InstanceType == "" {
			rec.InstanceType = nc.Labels[corev1.LabelInstanceTypeStable]
		}
		if !nc.DeletionTimestamp.IsZero() && rec.Deleting.IsZero() {
			rec.Deleting = now
		}
		if rec.Node != "" && tainted[rec.Node] && rec.Tainted.IsZero() {
			rec.Tainted = now
		}
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeDrifted); c != nil && c.IsTrue() {
			rec.Drifted = c.Reason
		}
		if nc.StatusConditions().Get(karpv1.ConditionTypeInstanceTerminating).IsTrue() && rec.Terminating.IsZero() {
			rec.Terminating = now
		}
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason); c != nil && c.IsTrue() {
			rec.DisruptionReason = c.Reason
		}
	}
	for name, rec := range r.claims {
		if !live[name] && rec.Gone.IsZero() {
			rec.Gone = now
			if rec.Deleting.IsZero() {
				rec.Deleting = now
			}
		}
	}
	// A NodeClaim is a replacement when another was being disrupted (its
	// Node tainted, or itself deleting) and not gone when it appeared,
	// this poll's view included: both sides taint before they launch.
	disrupting := false
	for _, rec := range r.claims {
		if !slices.Contains(added, rec) && (!rec.Deleting.IsZero() || !rec.Tainted.IsZero()) && (rec.Gone.IsZero() || rec.Gone.Equal(now)) {
			disrupting = true
		}
	}
	for _, rec := range added {
		rec.ReplacementFor = disrupting
	}
}

// watchPods records, in the order the API server reports them, the pods
// that start leaving (a deletionTimestamp, or deleted outright), re-watching
// when a watch ends.
func (r *diffRecorder) watchPods(ctx context.Context) {
	watchEach(ctx, r.kube, &corev1.PodList{}, func(ev watch.Event) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
			return
		}
		key := p.Namespace + "/" + p.Name
		r.mu.Lock()
		if r.pods[key] == nil {
			r.seq++
			r.pods[key] = &podRecord{Seq: r.seq, Leaving: time.Now(), Node: p.Spec.NodeName, App: p.Labels["app"]}
		}
		r.mu.Unlock()
	})
}

// watchEach calls fn with every event of a watch of list's kind, watching
// again (200 ms after a failed start) whenever the watch ends, until ctx
// ends.
func watchEach(ctx context.Context, kube client.WithWatch, list client.ObjectList, fn func(watch.Event)) {
	for ctx.Err() == nil {
		w, err := kube.Watch(ctx, list)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			fn(ev)
		}
		w.Stop()
	}
}

// watchReasons records the DisruptionReason of every NodeClaim update the
// polls know of: an empty NodeClaim can get its reason, be deleted and be
// gone between two polls 200 ms apart (a cold CI run saw karpx's "removed,
// reason " for the Empty one).
func (r *diffRecorder) watchReasons(ctx context.Context) {
	watchEach(ctx, r.kube, &karpv1.NodeClaimList{}, func(ev watch.Event) {
		nc, ok := ev.Object.(*karpv1.NodeClaim)
		if !ok {
			return
		}
		c := nc.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason)
		if c == nil || !c.IsTrue() {
			return
		}
		r.mu.Lock()
		if rec := r.claims[nc.Name]; rec != nil {
			rec.DisruptionReason = c.Reason
		}
		r.mu.Unlock()
	})
}

// resetPods forgets the pods seen leaving so far (a scenario's setup).
func (r *diffRecorder) resetPods() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = map[string]*podRecord{}
}

// snapshot returns copies of the records so far.
func (r *diffRecorder) snapshot() (map[string]claimRecord, map[string]podRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	claims := make(map[string]claimRecord, len(r.claims))
	for k, v := range r.claims {
		claims[k] = *v
	}
	pods := make(map[string]podRecord, len(r.pods))
	for k, v := range r.pods {
		pods[k] = *v
	}
	return claims, pods
}

// maxConcurrentDisruptions returns the largest number of claims (by name)
// that were disrupted at the same time: tainted or deleting, and neither
// gone nor with their instance terminating (InstanceTerminating=True),
// which is when Karpenter v1.14 stops counting a node against its
// NodePool's disruption budget (BuildDisruptionBudgetMapping,
// pkg/controllers/disruption/helpers.go@v1.14.3).
func maxConcurrentDisruptions(claims map[string]claimRecord, names []string) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, n := range names {
		c, ok := claims[n]
		if !ok {
			continue
		}
		start := c.Deleting
		if !c.Tainted.IsZero() && (start.IsZero() || c.Tainted.Before(start)) {
			start = c.Tainted
		}
		if start.IsZero() {
			continue
		}
		end := c.Gone
		if end.IsZero() {
			end = time.Now()
		}
		if !c.Terminating.IsZero() && c.Terminating.Before(end) {
			end = c.Terminating
		}
		edges = append(edges, edge{start, 1}, edge{end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// claimEvents returns, by NodeClaim name, the reasons and messages
// ("Reason: message") of the events on NodeClaims whose reason is one of
// reasons, sorted.
func (e *diffEnv) claimEvents(reasons ...string) map[string][]string {
	e.t.Helper()
	var events corev1.EventList
	if err := e.kube.List(e.ctx, &events); err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ev := range events.Items {
		if ev.InvolvedObject.Kind == "NodeClaim" && slices.Contains(reasons, ev.Reason) {
			out[ev.InvolvedObject.Name] = append(out[ev.InvolvedObject.Name], ev.Reason+": "+ev.Message)
		}
	}
	for k := range out {
		sort.Strings(out[k])
		out[k] = slices.Compact(out[k])
	}
	return out
}

// diffInfo prefixes the keys of a normalised decision that are shown
// beside each other but not compared.
const diffInfo = "(info) "

// compareDiff fails t for each key whose value differs between the sides'
// normalised decisions, printing both; it logs the whole of both.
func compareDiff(t *testing.T, what string, got map[string]map[string]string) {
	t.Helper()
	keys := map[string]bool{}
	for _, side := range diffSides {
		for k := range got[side] {
			keys[k] = true
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		fmt.Fprintf(&b, "\n  %-40s karpx: %-40s Karpenter: %s", k, got[sideKarpx][k], got[sideKarpenter][k])
		if !strings.HasPrefix(k, diffInfo) && got[sideKarpx][k] != got[sideKarpenter][k] {
			t.Errorf("%s: %s differs: karpx %q, Karpenter %q", what, k, got[sideKarpx][k], got[sideKarpenter][k])
		}
	}
	t.Logf("%s, karpx beside Karpenter %s:%s", what, AWSVersion, b.String())
}
