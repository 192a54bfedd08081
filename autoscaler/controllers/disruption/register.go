package disruption

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	podset "github.com/karpx/karpx/autoscaler/state/pods"
	"github.com/karpx/karpx/autoscaler/trigger"
)

// Register adds to mgr the Controller, the PodEvents controller (whose
// newest pod events the Controller then reads) and the watches that
// trigger a pass: pod deletions, completions and landings (bound, or
// judged unschedulable), NodeClaim, Node and NodePool changes.
func Register(mgr manager.Manager, c *Controller, podEvents *PodEvents) error {
	c.podEvents = podEvents
	if err := mgr.Add(c); err != nil {
		return err
	}
	if err := podEvents.Register(mgr); err != nil {
		return err
	}
	// Pods that leave (deleted), finish (phase changes), or land: bound or
	// judged unschedulable by kube-scheduler (consolidation waits for
	// moving pods, see moving).
	podGone := trigger.Deletions
	podGone.UpdateFunc = func(e event.UpdateEvent) bool {
		old, pod := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
		return pod.Status.Phase != old.Status.Phase ||
			podset.AwaitingScheduler(old) && !podset.AwaitingScheduler(pod)
	}
	return builder.ControllerManagedBy(mgr).Named("disruption.trigger").
		For(&corev1.Pod{}, builder.WithPredicates(podGone)).
		Watches(&karpv1.NodeClaim{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				// Status-only churn (lastPodEventTime, conditions) is
				// handled by the period; readiness and deletion matter.
				return !e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp()) ||
					initialized(e.ObjectNew) != initialized(e.ObjectOld)
			},
		})).
		Watches(&karpv1.NodePool{}, &handler.EnqueueRequestForObject{}).
		Complete(trigger.Reconciler(func(reconcile.Request) { c.Trigger() }))
}

func initialized(o client.Object) bool {
	nc, ok := o.(*karpv1.NodeClaim)
	return ok && nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()
}
