package lifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
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
