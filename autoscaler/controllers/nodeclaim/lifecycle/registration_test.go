package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
)

// TestRegistrationCountsTheNode: a launched NodeClaim whose Node appeared
// becomes Registered and its Node is counted once in
// karpenter_nodes_created_total{nodepool}, as Karpenter v1.14.0's
// registration does; before the Node exists nothing is counted.
func TestRegistrationCountsTheNode(t *testing.T) {
	now := time.Now()
	nc := gpuClaim(now.Add(-time.Minute))
	nc.Status.ProviderID = "aws:///us-east-1a/i-registered"
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	before := nodesCreated(t, "gpu")

	c, kube := newTestController(t, now, nc)
	if _, err := c.register(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	if got := nodesCreated(t, "gpu") - before; got != 0 {
		t.Fatalf("karpenter_nodes_created_total rose by %v before any Node registered", got)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-registered"}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
	if err := kube.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if _, err := c.register(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	if !nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		t.Fatal("NodeClaim not Registered")
	}
	if got := nodesCreated(t, "gpu") - before; got != 1 {
		t.Fatalf("karpenter_nodes_created_total{nodepool=gpu} rose by %v, want 1", got)
	}
}

// nodesCreated reads karpenter_nodes_created_total{nodepool=pool} from
// controller-runtime's registry, where Karpenter's collector lives.
func nodesCreated(t *testing.T, pool string) float64 {
	t.Helper()
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "karpenter_nodes_created_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "nodepool" && l.GetValue() == pool {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestRegistrationPatchesPastAStatusWrite: registration reads a Node its
// kubelet has written status to since (kwok, or a real kubelet, writes
// status just after the Node appears): the registration patch still
// applies, in one request, and keeps that status. Before, a merge patch
// under the whole Node's resourceVersion failed with 409 on nearly every
// Node of a burst and was sent again. Its control is a Node whose taints
// changed since the read (the node lifecycle controller added
// node.kubernetes.io/not-ready): registration writes nothing and tries
// again from a fresh read, so no taint is lost.
func TestRegistrationPatchesPastAStatusWrite(t *testing.T) {
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	for _, tt := range []struct {
		name       string
		write      func(context.Context, client.Client, *corev1.Node) error // what another writer changed after the read
		registered bool
	}{
		{"status written since the read", func(ctx context.Context, c client.Client, n *corev1.Node) error {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}}
			return c.Status().Update(ctx, n)
		}, true},
		{"taints changed since the read (control)", func(ctx context.Context, c client.Client, n *corev1.Node) error {
			n.Spec.Taints = append(n.Spec.Taints, notReady)
			return c.Update(ctx, n)
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			nc, node := launchedClaim(now, corev1.ConditionUnknown)
			node.Labels = map[string]string{corev1.LabelHostname: node.Name}
			c, l := newLagging(t, now, nc, node)
			api := l.store
			// The controller's cache still holds the Node as read.
			l.staleNode = &corev1.Node{}
			if err := api.Get(ctx, client.ObjectKeyFromObject(node), l.staleNode); err != nil {
				t.Fatal(err)
			}
			var current corev1.Node
			if err := api.Get(ctx, client.ObjectKeyFromObject(node), &current); err != nil {
				t.Fatal(err)
			}
			if err := tt.write(ctx, api, &current); err != nil {
				t.Fatal(err)
			}
			res, err := c.register(ctx, nc)
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Node
			if err := api.Get(ctx, client.ObjectKeyFromObject(node), &got); err != nil {
				t.Fatal(err)
			}
			registered := got.Labels[karpv1.NodeRegisteredLabelKey] == "true"
			if registered != tt.registered {
				t.Fatalf("Node registered %t, want %t (labels %v, taints %v)", registered, tt.registered, got.Labels, got.Spec.Taints)
			}
			if !tt.registered {
				if res.RequeueAfter != clusterstate.ConflictRequeue || !hasTaint(got.Spec.Taints, notReady) || !hasTaint(got.Spec.Taints, node.Spec.Taints[0]) {
					t.Fatalf("after a taint change: requeue %s, taints %v; want a requeue after %s, both taints kept", res.RequeueAfter, got.Spec.Taints, clusterstate.ConflictRequeue)
				}
				return
			}
			if l.writes["Node"] != 1 {
				t.Errorf("%d Node patches, want 1", l.writes["Node"])
			}
			if hasTaint(got.Spec.Taints, node.Spec.Taints[0]) || !controllerutil.ContainsFinalizer(&got, karpv1.TerminationFinalizer) ||
				len(got.OwnerReferences) != 1 || got.Labels[corev1.LabelHostname] != node.Name || got.Labels[karpv1.NodePoolLabelKey] != "gpu" {
				t.Errorf("registered Node: labels %v, taints %v, finalizers %v, owners %v", got.Labels, got.Spec.Taints, got.Finalizers, got.OwnerReferences)
			}
			if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "KubeletNotReady" {
				t.Errorf("the kubelet's status was lost: %v", got.Status.Conditions)
			}
		})
	}
}

// TestInitializationReasonSettles: a NodeClaim registered a moment ago
// whose Node moves on to another reason not to be initialised yet (Ready
// now, still tainted node.kubernetes.io/not-ready) writes nothing within
// InitializationReasonSettle of its registration and asks to be looked at
// again when it ends; after it the new reason is written. The control is a
// Node that is initialised within the window: Initialized=True is written
// at once.
func TestInitializationReasonSettles(t *testing.T) {
	ctx := context.Background()
	for _, initialised := range []bool{false, true} {
		now := time.Now()
		nc, node := launchedClaim(now, corev1.ConditionTrue)
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
		nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeInitialized, "NotInitialized", "Node not Ready")
		nc.Status.NodeName = node.Name
		node.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
		if initialised {
			node.Spec.Taints = nil
		}
		api := fakeAPI(nc, node)
		clk := clocktesting.NewFakeClock(now.Add(500 * time.Millisecond))
		health := launchhealth.New(launchhealth.Options{BaseBackoff: time.Minute, MaxBackoff: time.Hour})
		c := New(api, nil, record.NewFakeRecorder(100), health, Options{Clock: clk})
		initialize := func() (reconcile.Result, *status.Condition) {
			t.Helper()
			var cur karpv1.NodeClaim
			if err := api.Get(ctx, client.ObjectKeyFromObject(nc), &cur); err != nil {
				t.Fatal(err)
			}
			res, err := c.initialize(ctx, &cur, node.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if err := api.Get(ctx, client.ObjectKeyFromObject(nc), &cur); err != nil {
				t.Fatal(err)
			}
			return res, cur.StatusConditions().Get(karpv1.ConditionTypeInitialized)
		}
		res, cond := initialize()
		if initialised {
			if !cond.IsTrue() {
				t.Fatalf("an initialised Node within the window: Initialized %+v, want True at once", cond)
			}
			continue
		}
		if cond.Message != "Node not Ready" || res.RequeueAfter <= 0 || res.RequeueAfter > InitializationReasonSettle {
			t.Fatalf("within the window: Initialized %q, requeue %s; want the old reason kept and a requeue within %s", cond.Message, res.RequeueAfter, InitializationReasonSettle)
		}
		clk.Step(InitializationReasonSettle)
		if _, cond = initialize(); cond.Message == "Node not Ready" || !cond.IsUnknown() {
			t.Fatalf("after the window: Initialized %+v, want Unknown with the new reason", cond)
		}
	}
}
