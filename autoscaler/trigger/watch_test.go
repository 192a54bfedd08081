package trigger

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestReconcilerCallsItselfAndNeverRequeues(t *testing.T) {
	var got []reconcile.Request
	r := Reconciler(func(req reconcile.Request) { got = append(got, req) })
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res != (reconcile.Result{}) {
		t.Fatalf("Reconcile = %+v, %v; want an empty result and no error", res, err)
	}
	if len(got) != 1 || got[0] != req {
		t.Fatalf("called with %v, want [%v]", got, req)
	}
}

func TestDeletionsAdmitsDeletesOnly(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	if Deletions.Create(event.CreateEvent{Object: pod}) || Deletions.Update(event.UpdateEvent{ObjectOld: pod, ObjectNew: pod}) ||
		Deletions.Generic(event.GenericEvent{Object: pod}) {
		t.Error("a create, update or generic event was admitted")
	}
	if !Deletions.Delete(event.DeleteEvent{Object: pod}) {
		t.Error("a delete event was not admitted")
	}
}
