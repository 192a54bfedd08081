package provisioning

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/trigger"
)

// PodNodeNameField indexes pods by spec.nodeName in the manager's cache.
const PodNodeNameField = "spec.nodeName"

// IndexFields registers the cache indexes the Provisioner needs. It returns
// the indexer's error (a duplicate registration).
func IndexFields(ctx context.Context, mgr manager.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, PodNodeNameField, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	})
}

// IsProvisionable reports whether the autoscaler should find room for the
// pod: not bound, not terminating, not finished, not a DaemonSet pod (those
// follow nodes), and marked Unschedulable by kube-scheduler. Pods the
// scheduler has not tried yet are left to it, as Karpenter does.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || !pod.DeletionTimestamp.IsZero() ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" {
			return false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// Register adds to mgr the Provisioner and the watches that trigger it:
// provisionable pods, NodeClaim deletions (their pods become pending again)
// and NodePool changes.
//
// issue 9: gate, when given, wraps the Provisioner before it is added (the
// operator uses hydration.After, so no pass runs before the cloud data it
// needs is loaded).
func Register(mgr manager.Manager, p *Provisioner, gate ...func(manager.Runnable) manager.Runnable) error {
	var r manager.Runnable = p
	for _, g := range gate {
		r = g(r)
	}
	if err := mgr.Add(r); err != nil {
		return err
	}
	if err := builder.ControllerManagedBy(mgr).Named("provisioning.pods").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return IsProvisionable(o.(*corev1.Pod))
		}))).Complete(trigger.Reconciler(func(req reconcile.Request) {
		// The first event of a pending pod is when provisioning latency
		// starts.
		p.opts.Latency.Seen(req.NamespacedName)
		p.Trigger("pod " + req.String())
	})); err != nil {
		return err
	}
	return builder.ControllerManagedBy(mgr).Named("provisioning.nodepools").
		For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(trigger.Deletions)).
		Complete(trigger.Reconciler(func(req reconcile.Request) { p.Trigger("nodepool or nodeclaim " + req.Name) }))
}
