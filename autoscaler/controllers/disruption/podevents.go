package disruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	podset "github.com/karpx/karpx/autoscaler/state/pods"
)

// PodEventDedupe is the shortest time between a NodeClaim's
// status.lastPodEventTime and the next value written over it: 10 s,
// Karpenter's dedupeTimeout (pkg/controllers/nodeclaim/podevents/
// controller.go, v1.13.0 to v1.15.0). Karpenter drops the pod events
// inside the window; karpx writes the time of the newest one at the
// window's end, so the stored time is that of the last pod event rounded
// up to a whole second (the API server keeps seconds), never earlier, and
// the disruption Controller counts consolidateAfter from the newest event
// this process has seen even before it is written.
const PodEventDedupe = 10 * time.Second

// PodEvents keeps status.lastPodEventTime of each NodeClaim: the last time a
// reschedulable pod was bound to its Node or left it. consolidateAfter
// counts from there. It remembers the newest pod event of each Node until
// the Node is gone, so that a write folded into the dedupe window carries
// the event's time and the disruption Controller sees it at once (Newest).
type PodEvents struct {
	kube  client.Client
	clock clock.PassiveClock

	mu sync.Mutex
	// newest is the time of the newest pod event seen on each Node, by
	// Node name; an entry goes when the Node is deleted, or when a
	// reconcile finds the Node or its NodeClaim gone or being deleted.
	newest map[string]time.Time
}

// NewPodEvents returns a PodEvents controller.
func NewPodEvents(kube client.Client, clk clock.PassiveClock) *PodEvents {
	return &PodEvents{kube: kube, clock: clk, newest: map[string]time.Time{}}
}

// Newest returns the time of the newest pod event this process has seen on
// the Node named node (a bind, or a reschedulable pod leaving it), or the
// zero time if none. It is safe on a nil PodEvents (zero time).
func (p *PodEvents) Newest(node string) time.Time {
	if p == nil {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.newest[node]
}

// observe records a pod event on node now.
func (p *PodEvents) observe(node string) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.After(p.newest[node]) {
		p.newest[node] = now
	}
}

// forget drops what PodEvents remembers of node.
func (p *PodEvents) forget(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.newest, node)
}

// ceilSecond returns t rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); r.Before(t) {
		return r.Add(time.Second)
	}
	return t
}

// Register adds the controller to mgr, keyed by Node name.
func (p *PodEvents) Register(mgr manager.Manager) error {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], node string) {
		p.observe(node)
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
	}
	// enqueueBound is enqueue for a created or deleted pod: one bound to a
	// Node that consolidation would move.
	enqueueBound := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], pod *corev1.Pod) {
		if pod.Spec.NodeName != "" && podset.Evictable(pod) {
			enqueue(q, pod.Spec.NodeName)
		}
	}
	return builder.ControllerManagedBy(mgr).Named("nodeclaim.podevents").
		Watches(&corev1.Pod{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				// Informer start-up lists every pod as created; only pods
				// created bound (static or pre-bound) count, and those
				// are rare. The binding itself is an update.
				if pod := e.Object.(*corev1.Pod); p.clock.Since(pod.CreationTimestamp.Time) < time.Minute {
					enqueueBound(q, pod)
				}
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				old, cur := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
				bound := old.Spec.NodeName == "" && cur.Spec.NodeName != ""
				left := podset.Reschedulable(old) && !podset.Reschedulable(cur)
				if bound || left {
					enqueue(q, cur.Spec.NodeName)
				}
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if pod, ok := e.Object.(*corev1.Pod); ok {
					enqueueBound(q, pod)
				}
			},
		}).
		// A Node deleted with no pod left on it wakes no reconcile: what
		// PodEvents remembers of it goes here.
		Watches(&corev1.Node{}, handler.Funcs{
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				p.forget(e.Object.GetName())
			},
		}).Complete(p)
}

// Reconcile writes the newest pod event of the Node req names to its
// NodeClaim's status.lastPodEventTime, at most once per PodEventDedupe
// (a later event is written at the window's end, through RequeueAfter). A
// NodeClaim being deleted is left alone: it is never a consolidation
// candidate again. A Node this process saw no event on (it restarted since)
// gets the current time, which is not before the event that woke it.
func (p *PodEvents) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := p.kube.Get(ctx, req.NamespacedName, node); err != nil || node.Spec.ProviderID == "" {
		if apierrors.IsNotFound(err) {
			p.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var list karpv1.NodeClaimList
	if err := p.kube.List(ctx, &list, client.MatchingFields{clusterstate.NodeClaimProviderIDField: node.Spec.ProviderID}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeClaims of Node %s: %w", node.Name, err)
	}
	if len(list.Items) == 0 || !list.Items[0].DeletionTimestamp.IsZero() || !node.DeletionTimestamp.IsZero() {
		p.forget(node.Name)
		return reconcile.Result{}, nil
	}
	nc := &list.Items[0]
	now := p.clock.Now()
	event := p.Newest(node.Name)
	if event.IsZero() {
		event = now
	}
	// The API server keeps whole seconds (metav1.Time): rounding up keeps
	// the stored time from ever being before the event.
	event = ceilSecond(event)
	if !event.After(nc.Status.LastPodEventTime.Time) {
		return reconcile.Result{}, nil
	}
	if wait := nc.Status.LastPodEventTime.Add(PodEventDedupe).Sub(now); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	stored := nc.DeepCopy()
	nc.Status.LastPodEventTime = metav1.NewTime(event)
	return reconcile.Result{}, client.IgnoreNotFound(p.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)))
}
