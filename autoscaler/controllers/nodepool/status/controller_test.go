package status

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	ec2v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
)

// TestNodeClassRefProblems: a NodePool whose nodeClassRef is unset, empty,
// of another kind or names a missing EC2NodeClass gets NodeClassReady=False
// with a reason naming the problem (and no panic).
func TestNodeClassRefProblems(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ref        *karpv1.NodeClassReference
		wantReason string
		wantInMsg  string
	}{
		{"unset", nil, "NodeClassRefMissing", "nodeClassRef is not set"},
		{"no name", &karpv1.NodeClassReference{Group: ec2v1.Group, Kind: "EC2NodeClass"}, "NodeClassRefMissing", "nodeClassRef is not set"},
		{"other kind", &karpv1.NodeClassReference{Group: "example.com", Kind: "Other", Name: "x"}, "UnsupportedNodeClass", "EC2NodeClass"},
		{"missing class", &karpv1.NodeClassReference{Group: ec2v1.Group, Kind: "EC2NodeClass", Name: "gone"}, "NodeClassNotFound", "EC2NodeClass gone not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}}
			np.Spec.Template.Spec.NodeClassRef = tc.ref
			kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&karpv1.NodePool{}).WithObjects(np).Build()
			rec := record.NewFakeRecorder(4)
			c := New(kube, launchhealth.New(launchhealth.Options{}), rec)
			if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "pool"}}); err != nil {
				t.Fatal(err)
			}
			got := &karpv1.NodePool{}
			if err := kube.Get(context.Background(), types.NamespacedName{Name: "pool"}, got); err != nil {
				t.Fatal(err)
			}
			cond := got.StatusConditions().Get(karpv1.ConditionTypeNodeClassReady)
			if cond == nil || !cond.IsFalse() || cond.Reason != tc.wantReason || !strings.Contains(cond.Message, tc.wantInMsg) {
				t.Fatalf("NodeClassReady = %+v, want False %s containing %q", cond, tc.wantReason, tc.wantInMsg)
			}
			select {
			case ev := <-rec.Events:
				if !strings.Contains(ev, "NodeClassNotReady") {
					t.Fatalf("event %q, want NodeClassNotReady", ev)
				}
			default:
				t.Fatal("no NodeClassNotReady event")
			}
		})
	}
}
