package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
)

// Static capacity's scenario (docs/static-capacity.md). The NodePool
// asks for consolidation of empty nodes at once (WhenEmptyOrUnderutilized,
// consolidateAfter 0s), which a static NodePool ignores, as Karpenter's
// does: its nodes stay empty and are never removed for it.

// staticPoolYAML is NodePool "static" with spec.replicas replicas,
// limits.nodes 4, on-demand m5.large, and the consolidation settings a
// dynamic NodePool would empty its nodes with.
func staticPoolYAML(replicas int) string {
	p := nodePool{Name: "static", Labels: map[string]string{"pool": "static"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{onDemand}, Disruption: "{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}",
		Limits: `{nodes: "4"}`}
	return strings.Replace(p.yaml(), "spec:\n", fmt.Sprintf("spec:\n  replicas: %d\n", replicas), 1)
}

// staticCounts returns the names of pool's NodeClaims not being deleted
// (sorted), how many of them are Initialized, and how many are being
// deleted.
func (e *env) staticCounts(ctx context.Context, pool string) (live []string, initialized, deleting int, err error) {
	claims, err := e.poolClaims(ctx, pool)
	if err != nil {
		return nil, 0, 0, err
	}
	for i := range claims {
		nc := &claims[i]
		if !nc.DeletionTimestamp.IsZero() {
			deleting++
			continue
		}
		live = append(live, nc.Name)
		if nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			initialized++
		}
	}
	slices.Sort(live)
	return live, initialized, deleting, nil
}

// poolNodes counts the Nodes labelled karpenter.sh/nodepool=pool.
func (e *env) poolNodes(ctx context.Context, pool string) (int, error) {
	var nodes corev1.NodeList
	err := e.kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	return len(nodes.Items), err
}

// TestStaticCapacity: with --feature-gates StaticCapacity=true, a NodePool
// with replicas 3 gets three Initialized nodes without any pod; they stay
// (no consolidation, though empty and consolidateAfter 0s) for 30 s, 15
// disruption passes; a deleted NodeClaim is replaced; replicas 3 → 1
// scales in to one NodeClaim and one Node; kubectl karpx status shows
// desired and current. The control, the same NodePool with the gate off
// (Karpenter's default too), is TestStaticCapacityGateOffLaunchesNothing;
// the differential one, the same NodePool on the real Karpenter AWS
// provider, is test/upstream TestUpstreamStaticCapacity.
func TestStaticCapacity(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-static", func(o *operator.Options) {
		o.FeatureGates = "StaticCapacity=true"
		o.DisruptionPeriod = 2 * time.Second
	}, nil)
	start := time.Now()
	e.apply(ec2NodeClassYAML("static", e.name), staticPoolYAML(3))
	var first []string
	e.eventually(3*time.Minute, "3 Initialized NodeClaims of the static NodePool, no pod", func(ctx context.Context) (bool, error) {
		live, init, _, err := e.staticCounts(ctx, "static")
		first = live
		return err == nil && len(live) == 3 && init == 3, err
	})
	launched := time.Since(start)

	// Never consolidated: the three empty nodes stay through 15 passes.
	hold := time.Now().Add(30 * time.Second)
	for time.Now().Before(hold) {
		live, _, deleting, err := e.staticCounts(e.ctx, "static")
		if err != nil {
			t.Fatal(err)
		}
		if deleting != 0 || !slices.Equal(live, first) {
			t.Fatalf("static NodePool's NodeClaims changed without a cause: %v (%d deleting), were %v", live, deleting, first)
		}
		time.Sleep(time.Second)
	}
	status := e.kubectlWithPath(buildPlugin(t, e.root), "karpx", "status")
	if !strings.Contains(status, "static: desired 3, current 3 (ready 3), deleting 0, limits.nodes 4") {
		t.Errorf("kubectl karpx status does not show desired 3, current 3:\n%s", status)
	}

	// A deleted NodeClaim is replaced.
	gone := first[0]
	if err := e.kube.Delete(e.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: gone}}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	e.eventually(3*time.Minute, "the deleted NodeClaim gone and replaced: 3 Initialized NodeClaims", func(ctx context.Context) (bool, error) {
		live, init, deleting, err := e.staticCounts(ctx, "static")
		return err == nil && len(live) == 3 && init == 3 && deleting == 0 && !slices.Contains(live, gone), err
	})
	replaced := time.Since(deleted)

	// replicas 3 → 1: scale in to one.
	var np karpv1.NodePool
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: "static"}, &np); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Replicas = ptr.To[int64](1)
	if err := e.kube.Patch(e.ctx, &np, patch); err != nil {
		t.Fatal(err)
	}
	scaled := time.Now()
	e.eventually(3*time.Minute, "one NodeClaim and one Node left", func(ctx context.Context) (bool, error) {
		live, init, deleting, err := e.staticCounts(ctx, "static")
		if err != nil || len(live) != 1 || init != 1 || deleting != 0 {
			return false, err
		}
		n, err := e.poolNodes(ctx, "static")
		return n == 1, err
	})
	scaledIn := time.Since(scaled)
	status = e.kubectlWithPath(buildPlugin(t, e.root), "karpx", "status")
	if !strings.Contains(status, "static: desired 1, current 1 (ready 1), deleting 0, limits.nodes 4") {
		t.Errorf("kubectl karpx status does not show desired 1, current 1:\n%s", status)
	}
	scenarioLogf(t, "scenario static-capacity: 3 of 3 nodes Initialized %s after the NodePool was applied (no pod), unchanged for 30 s with consolidateAfter 0s, a deleted NodeClaim replaced in %s, replicas 3→1 down to 1 NodeClaim and 1 Node in %s",
		launched.Round(time.Second), replaced.Round(time.Second), scaledIn.Round(time.Second))
}

// TestStaticCapacityGateOffLaunchesNothing is TestStaticCapacity's
// control: karpx with its default feature gates (StaticCapacity=false,
// Karpenter's default) launches nothing for the same NodePool in 30 s,
// since pending pods never launch a static NodePool's nodes: without
// static capacity the NodePool stays at zero nodes.
func TestStaticCapacityGateOffLaunchesNothing(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-static-off", func(o *operator.Options) { o.DisruptionPeriod = 2 * time.Second }, nil)
	e.apply(ec2NodeClassYAML("static", e.name), staticPoolYAML(3))
	hold := time.Now().Add(30 * time.Second)
	for time.Now().Before(hold) {
		live, _, deleting, err := e.staticCounts(e.ctx, "static")
		if err != nil {
			t.Fatal(err)
		}
		if len(live)+deleting != 0 {
			t.Fatalf("NodeClaims %v with StaticCapacity off; want none", live)
		}
		time.Sleep(time.Second)
	}
	status := e.kubectlWithPath(buildPlugin(t, e.root), "karpx", "status")
	if !strings.Contains(status, "static: desired 3, current 0 (ready 0), deleting 0, limits.nodes 4; launching 3") {
		t.Errorf("kubectl karpx status does not show desired 3, current 0:\n%s", status)
	}
	scenarioLogf(t, "scenario static-capacity control: StaticCapacity=false, 0 of 3 nodes after 30 s")
}
