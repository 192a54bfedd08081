package trigger

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Reconciler is a controller-runtime reconciler that only calls itself with
// each request (typically to fire a Trigger) and never requeues: the
// controller it completes exists to turn a watch's events into passes.
type Reconciler func(reconcile.Request)

// Reconcile implements reconcile.Reconciler; it never fails.
func (r Reconciler) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	r(req)
	return reconcile.Result{}, nil
}

// Deletions admits delete events only: a watched object's creations,
// updates and generic events do not fire.
var Deletions = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
