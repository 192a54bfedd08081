package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
)

// spotToSpot launches one spot m5.2xlarge node for a small pod, then widens
// the NodePool to every type so that many cheaper spot types fit the pod,
// and returns the env and the first NodeClaim.
func spotToSpot(t *testing.T, name string, gate string) (*env, karpv1.NodeClaim) {
	e := newEnvWithLog(t, name, func(o *operator.Options) { o.FeatureGates = gate }, nil)
	pool := nodePool{Name: "s2s", Labels: map[string]string{"s2s": "yes"}, InstanceTypes: []string{"m5.2xlarge"},
		CapacityTypes: []string{"spot"}, Disruption: "{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}"}
	e.apply(ec2NodeClassYAML("s2s", e.name), pool.yaml())
	web := deployment("web", 1, "500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"s2s": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 1, nil
	})
	old := e.onlyNodeClaim()
	if old.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot {
		t.Fatalf("first node is %s, want spot", old.Labels[karpv1.CapacityTypeLabelKey])
	}
	pool.InstanceTypes = nil
	pool.Requirements = []string{"{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}"}
	e.apply(pool.yaml())
	return e, old
}

// TestSpotToSpotConsolidationGateOff: without Karpenter's
// SpotToSpotConsolidation gate (its default) a spot node is not replaced
// by a cheaper spot node; the NodeClaim gets Karpenter's Unconsolidatable
// event. The control is the old rule, which replaced it at once.
func TestSpotToSpotConsolidationGateOff(t *testing.T) {
	runInParallel(t)
	e, old := spotToSpot(t, "karpx-s2s-off", "SpotToSpotConsolidation=false")
	e.eventually(60*time.Second, "an Unconsolidatable event on the spot NodeClaim", func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := e.kube.List(ctx, &events); err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "Unconsolidatable" && ev.InvolvedObject.Name == old.Name &&
				ev.Message == "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node" {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(20 * time.Second)
	if e.nodeClaimGone(e.ctx, old.Name) || len(e.nodeClaims()) != 1 {
		t.Fatalf("the spot node was replaced (%d NodeClaims) with SpotToSpotConsolidation off", len(e.nodeClaims()))
	}
}

// TestSpotToSpotConsolidationGateOn: with the gate, the spot m5.2xlarge
// is replaced by a cheaper spot node launched from the 15 cheapest types.
func TestSpotToSpotConsolidationGateOn(t *testing.T) {
	runInParallel(t)
	e, old := spotToSpot(t, "karpx-s2s-on", "SpotToSpotConsolidation=true")
	e.eventually(180*time.Second, "the spot node replaced by a cheaper spot node, web Running", func(ctx context.Context) (bool, error) {
		if !e.nodeClaimGone(ctx, old.Name) || countRunning(ctx, e.kube, "web") != 1 {
			return false, nil
		}
		for _, nc := range e.nodeClaims() {
			if nc.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot {
				return false, nil
			}
			for _, r := range nc.Spec.Requirements {
				if r.Key == corev1.LabelInstanceTypeStable && len(r.Values) > 15 {
					t.Errorf("replacement launched from %d types, want at most 15", len(r.Values))
				}
			}
		}
		return true, nil
	})
}
