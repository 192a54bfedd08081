package headtohead

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
)

// WorkloadLabel marks every pod and ReplicaSet the harness creates; its
// value names the workload ("burst", "p5").
const WorkloadLabel = "karpx.dev/h2h"

// podRecord is what the recorder saw of one pod: the wall-clock times its
// watch events arrived (millisecond resolution, unlike the API's
// one-second timestamps).
type podRecord struct {
	name, workload, owner string
	// created is when the pod was first seen (its creation).
	created time.Time
	// running is when it was first seen Running and Ready (zero: not yet).
	running time.Time
	// deleted is when it was first seen terminating or gone.
	deleted time.Time
	// bound is when it was first seen with spec.nodeName set (zero: not
	// yet).
	bound    time.Time
	nodeName string
}

// nodeClaimRecord is what the recorder saw of one NodeClaim.
type nodeClaimRecord struct {
	name, nodePool, nodeName string
	created, deleted         time.Time
}

// nodeRecord is what the recorder saw of one Node.
type nodeRecord struct {
	name                                   string
	nodePool, instanceType, capacity, zone string
	created, ready, deleted                time.Time
	// registered is when it was first seen without the
	// karpenter.sh/unregistered taint, which the autoscaler's
	// registration removes (zero: not yet).
	registered time.Time
	// schedulable is when it was first seen without a NoSchedule or
	// NoExecute taint (zero: not yet); the burst's pods tolerate none.
	schedulable time.Time
}

// Recorder watches pods, Nodes and NodeClaims with the admin's client and
// keeps, for each, when it appeared, became Running (pods) or Ready
// (Nodes) and went away. It also keeps the lowest count of Running and
// Ready workload pods since the last ResetMinReady. All methods are safe
// for concurrent use.
type Recorder struct {
	mu         sync.Mutex
	pods       map[types.UID]*podRecord
	nodeClaims map[string]*nodeClaimRecord
	nodes      map[string]*nodeRecord
	ready      int
	minReady   int
}

// NewRecorder starts watching the cluster of cfg and returns once the
// watches have synced; they stop when ctx ends.
func NewRecorder(ctx context.Context, cfg *rest.Config) (*Recorder, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	r := &Recorder{pods: map[types.UID]*podRecord{}, nodeClaims: map[string]*nodeClaimRecord{}, nodes: map[string]*nodeRecord{}}
	for _, h := range []struct {
		obj client.Object
		on  func(obj any, gone bool)
	}{
		{&corev1.Pod{}, r.onPod},
		{&corev1.Node{}, r.onNode},
		{&karpv1.NodeClaim{}, r.onNodeClaim},
	} {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, err
		}
		on := h.on
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { on(obj, false) },
			UpdateFunc: func(_, obj any) { on(obj, false) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				on(obj, true)
			},
		}); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("recorder: watches did not sync")
	}
	return r, nil
}

func podRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *Recorder) onPod(obj any, gone bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[WorkloadLabel] == "" {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.pods[p.UID]
	if rec == nil {
		rec = &podRecord{name: p.Name, workload: p.Labels[WorkloadLabel], created: now}
		if len(p.OwnerReferences) > 0 {
			rec.owner = p.OwnerReferences[0].Name
		}
		r.pods[p.UID] = rec
	}
	wasReady := !rec.running.IsZero() && rec.deleted.IsZero()
	if p.Spec.NodeName != "" {
		rec.nodeName = p.Spec.NodeName
		if rec.bound.IsZero() {
			rec.bound = now
		}
	}
	if rec.running.IsZero() && podRunning(p) {
		rec.running = now
	}
	if rec.deleted.IsZero() && (gone || p.DeletionTimestamp != nil) {
		rec.deleted = now
	}
	isReady := !rec.running.IsZero() && rec.deleted.IsZero()
	switch {
	case isReady && !wasReady:
		r.ready++
	case wasReady && !isReady:
		r.ready--
		r.minReady = min(r.minReady, r.ready)
	}
}

func (r *Recorder) onNode(obj any, gone bool) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.nodes[n.Name]
	if rec == nil {
		rec = &nodeRecord{name: n.Name, created: now}
		r.nodes[n.Name] = rec
	}
	rec.nodePool = n.Labels[karpv1.NodePoolLabelKey]
	rec.instanceType = n.Labels[corev1.LabelInstanceTypeStable]
	rec.capacity = n.Labels[karpv1.CapacityTypeLabelKey]
	rec.zone = n.Labels[corev1.LabelTopologyZone]
	if rec.ready.IsZero() {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				rec.ready = now
			}
		}
	}
	if rec.registered.IsZero() && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == karpv1.UnregisteredTaintKey
	}) {
		rec.registered = now
	}
	if rec.schedulable.IsZero() && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}) {
		rec.schedulable = now
	}
	if rec.deleted.IsZero() && (gone || n.DeletionTimestamp != nil) {
		rec.deleted = now
	}
}

func (r *Recorder) onNodeClaim(obj any, gone bool) {
	nc, ok := obj.(*karpv1.NodeClaim)
	if !ok {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.nodeClaims[nc.Name]
	if rec == nil {
		rec = &nodeClaimRecord{name: nc.Name, nodePool: nc.Labels[karpv1.NodePoolLabelKey], created: now}
		r.nodeClaims[nc.Name] = rec
	}
	if nc.Status.NodeName != "" {
		rec.nodeName = nc.Status.NodeName
	}
	// A NodeClaim counts as gone once it is fully deleted: that is when
	// its instance is terminated and its finalizer removed.
	if gone && rec.deleted.IsZero() {
		rec.deleted = now
	}
}

// ResetMinReady starts a new lowest-count window at the current count of
// Running and Ready workload pods.
func (r *Recorder) ResetMinReady() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.minReady = r.ready
}

// MinReady returns the lowest count of Running and Ready workload pods
// since ResetMinReady.
func (r *Recorder) MinReady() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.minReady
}

// Snapshot is a copy of the recorder's state at one moment.
type Snapshot struct {
	// At is when the copy was taken.
	At         time.Time
	Pods       []podRecord
	NodeClaims []nodeClaimRecord
	Nodes      []nodeRecord
}

// Snapshot returns a copy of everything recorded so far.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Snapshot{At: time.Now()}
	for _, p := range r.pods {
		s.Pods = append(s.Pods, *p)
	}
	for _, nc := range r.nodeClaims {
		s.NodeClaims = append(s.NodeClaims, *nc)
	}
	for _, n := range r.nodes {
		s.Nodes = append(s.Nodes, *n)
	}
	return s
}

// LiveNodes returns the Nodes of nodePool ("" for every NodePool; Nodes
// without one, such as the probe, never count) that exist and are not
// being deleted.
func (s Snapshot) LiveNodes(nodePool string) []nodeRecord {
	var out []nodeRecord
	for _, n := range s.Nodes {
		if n.nodePool == "" || (nodePool != "" && n.nodePool != nodePool) || !n.deleted.IsZero() {
			continue
		}
		out = append(out, n)
	}
	return out
}

// LastNodeChange returns the latest time after since at which a Node of
// nodePool (Nodes without one never count) appeared or began to be
// deleted, or since when none did: the consolidation has settled once it
// lies far enough behind.
func (s Snapshot) LastNodeChange(nodePool string, since time.Time) time.Time {
	last := since
	for _, n := range s.Nodes {
		if n.nodePool == "" || n.nodePool != nodePool {
			continue
		}
		for _, t := range []time.Time{n.created, n.deleted} {
			if t.After(last) {
				last = t
			}
		}
	}
	return last
}

// LiveNodeClaims returns how many NodeClaims exist (being deleted or not).
func (s Snapshot) LiveNodeClaims() int {
	n := 0
	for _, nc := range s.NodeClaims {
		if nc.deleted.IsZero() {
			n++
		}
	}
	return n
}

// WorkloadPods returns the pods of workload that exist and are not being
// deleted, and how many of them are Running and Ready.
func (s Snapshot) WorkloadPods(workload string) (live, running int) {
	for _, p := range s.Pods {
		if p.workload != workload || !p.deleted.IsZero() {
			continue
		}
		live++
		if !p.running.IsZero() {
			running++
		}
	}
	return live, running
}

// OldestNotRunning returns how long before at the oldest live pod of
// workload that is not Running was created, and 0 when every live pod
// is Running: it tells a pod that consolidation has just moved (created
// a second or two before) from one that is stuck.
func (s Snapshot) OldestNotRunning(workload string, at time.Time) time.Duration {
	var oldest time.Duration
	for _, p := range s.Pods {
		if p.workload != workload || !p.deleted.IsZero() || !p.running.IsZero() {
			continue
		}
		oldest = max(oldest, at.Sub(p.created))
	}
	return oldest
}
