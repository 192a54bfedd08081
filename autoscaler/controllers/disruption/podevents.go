package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// PodEventDedupe is the shortest time between two writes of one
// NodeClaim's status.lastPodEventTime; events inside it are folded into
// one write at its end. Karpenter's dedupeTimeout is 10 s
// (pkg/controllers/nodeclaim/podevents/controller.go, v1.13.0 to v1.15.0),
// and it drops such events instead; karpx keeps 5 s, as it writes the
// time at the window's end: consolidateAfter then counts from at most 5 s
// after the last pod event, never from before it.
const PodEventDedupe = 5 * time.Second

// PodEvents keeps status.lastPodEventTime of each NodeClaim: the last time a
// reschedulable pod was bound to its Node or left it. consolidateAfter
// counts from there.
type PodEvents struct {
	kube  client.Client
	clock clock.PassiveClock
}

// NewPodEvents returns a PodEvents controller.
func NewPodEvents(kube client.Client, clk clock.PassiveClock) *PodEvents {
	return &PodEvents{kube: kube, clock: clk}
}

// Register adds the controller to mgr, keyed by Node name.
func (p *PodEvents) Register(mgr manager.Manager) error {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], pod *corev1.Pod) {
		if pod.Spec.NodeName != "" && podset.Evictable(pod) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: pod.Spec.NodeName}})
		}
	}
	return builder.ControllerManagedBy(mgr).Named("nodeclaim.podevents").
		Watches(&corev1.Pod{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				// Informer start-up lists every pod as created; only pods
				// created bound (static or pre-bound) count, and those
				// are rare. The binding itself is an update.
				if pod := e.Object.(*corev1.Pod); p.clock.Since(pod.CreationTimestamp.Time) < time.Minute {
					enqueue(q, pod)
				}
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				old, cur := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
				bound := old.Spec.NodeName == "" && cur.Spec.NodeName != ""
				left := podset.Reschedulable(old) && !podset.Reschedulable(cur)
				if bound || left {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: cur.Spec.NodeName}})
				}
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if pod, ok := e.Object.(*corev1.Pod); ok {
					enqueue(q, pod)
				}
			},
		}).Complete(p)
}

// Reconcile stamps the NodeClaim of the Node req names.
func (p *PodEvents) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := p.kube.Get(ctx, req.NamespacedName, node); err != nil || node.Spec.ProviderID == "" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var list karpv1.NodeClaimList
	if err := p.kube.List(ctx, &list, client.MatchingFields{clusterstate.NodeClaimProviderIDField: node.Spec.ProviderID}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeClaims of Node %s: %w", node.Name, err)
	}
	if len(list.Items) == 0 {
		return reconcile.Result{}, nil
	}
	nc := &list.Items[0]
	now := p.clock.Now()
	if wait := nc.Status.LastPodEventTime.Add(PodEventDedupe).Sub(now); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	stored := nc.DeepCopy()
	nc.Status.LastPodEventTime = metav1.NewTime(now)
	return reconcile.Result{}, client.IgnoreNotFound(p.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)))
}
