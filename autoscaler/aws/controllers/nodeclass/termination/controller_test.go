package termination

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	v1 "github.com/karpx/karpx/apis/v1"
)

type cleaner struct{ calls []string }

func (c *cleaner) DeleteLaunchTemplates(_ context.Context, name string) (int, error) {
	c.calls = append(c.calls, "launchTemplates/"+name)
	return 2, nil
}

func (c *cleaner) DeleteInstanceProfile(_ context.Context, name string) (bool, error) {
	c.calls = append(c.calls, "instanceProfile/"+name)
	return true, nil
}

func TestFinalizerWaitsForNodeClaimsThenDeletesLaunchTemplates(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc"}}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1.Group, Kind: "EC2NodeClass", Name: "default"}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, nc).Build()
	cl := &cleaner{}
	c := New(kube, cl, record.NewFakeRecorder(10))
	ctx := context.Background()
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "default"}}
	get := func() (*v1.EC2NodeClass, error) {
		class := &v1.EC2NodeClass{}
		return class, kube.Get(ctx, req.NamespacedName, class)
	}

	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	class, _ := get()
	if len(class.Finalizers) != 1 || class.Finalizers[0] != v1.TerminationFinalizer {
		t.Fatalf("finalizers %v", class.Finalizers)
	}
	if err := kube.Delete(ctx, class); err != nil {
		t.Fatal(err)
	}
	res, err := c.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != WaitPeriod || len(cl.calls) != 0 {
		t.Fatalf("with a NodeClaim using the class: %+v %v, cleaner calls %v", res, err, cl.calls)
	}
	if _, err := get(); err != nil {
		t.Fatalf("class gone while a NodeClaim uses it: %v", err)
	}
	if err := kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if len(cl.calls) != 2 || cl.calls[0] != "launchTemplates/default" || cl.calls[1] != "instanceProfile/default" {
		t.Errorf("cleaner calls %v", cl.calls)
	}
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Errorf("class after finalizing: %v, want NotFound", err)
	}
}
