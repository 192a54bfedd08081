package upstream

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestUpstreamStaticCapacity runs karpx's static capacity scenario
// (test/e2e TestStaticCapacity, docs/static-capacity.md) on the real
// Karpenter AWS provider with FEATURE_GATES=StaticCapacity=true: the same
// NodePool (replicas 3, limits.nodes 4, on-demand m5.large,
// WhenEmptyOrUnderutilized after 0s) gets 3 Initialized nodes without any
// pod, keeps them for 30 s, replaces a deleted NodeClaim and scales in to
// one for replicas 1. The counts karpx reaches are Karpenter's.
func TestUpstreamStaticCapacity(t *testing.T) {
	e := startAWSEnv(t, 12*time.Minute, "StaticCapacity=true", nil)
	ctx, c, kube := e.ctx, e.cluster, e.kube

	if _, err := c.Kubectl(ctx, []byte(EC2NodeClassYAML("default", c.Name, "al2023@latest")), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	np := nodePool("static", "default", map[string]string{"pool": "static"})
	np.Spec.Replicas = ptr.To[int64](3)
	np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("4")}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	start := time.Now()
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	var first []string
	e.eventually(4*time.Minute, "3 Initialized NodeClaims of Karpenter's static NodePool, no pod", func(ctx context.Context) (bool, error) {
		live, init, _, err := e.staticCounts(ctx, "static")
		first = live
		return err == nil && len(live) == 3 && init == 3, err
	})
	launched := time.Since(start)

	hold := time.Now().Add(30 * time.Second)
	for time.Now().Before(hold) {
		live, _, deleting, err := e.staticCounts(ctx, "static")
		if err != nil {
			t.Fatal(err)
		}
		if deleting != 0 || !slices.Equal(live, first) {
			t.Fatalf("Karpenter changed the static NodePool's NodeClaims without a cause: %v (%d deleting), were %v", live, deleting, first)
		}
		time.Sleep(time.Second)
	}

	gone := first[0]
	if err := kube.Delete(ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: gone}}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	e.eventually(4*time.Minute, "the deleted NodeClaim gone and replaced: 3 Initialized NodeClaims", func(ctx context.Context) (bool, error) {
		live, init, deleting, err := e.staticCounts(ctx, "static")
		return err == nil && len(live) == 3 && init == 3 && deleting == 0 && !slices.Contains(live, gone), err
	})
	replaced := time.Since(deleted)

	if err := kube.Get(ctx, client.ObjectKey{Name: "static"}, np); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Replicas = ptr.To[int64](1)
	if err := kube.Patch(ctx, np, patch); err != nil {
		t.Fatal(err)
	}
	scaled := time.Now()
	e.eventually(4*time.Minute, "one NodeClaim and one Node left", func(ctx context.Context) (bool, error) {
		live, init, deleting, err := e.staticCounts(ctx, "static")
		if err != nil || len(live) != 1 || init != 1 || deleting != 0 {
			return false, err
		}
		var nodes corev1.NodeList
		err = kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: "static"})
		return len(nodes.Items) == 1, err
	})
	t.Logf("scenario static-capacity upstream: Karpenter %s: 3 of 3 nodes Initialized %s after the NodePool was applied (no pod), unchanged for 30 s with consolidateAfter 0s, a deleted NodeClaim replaced in %s, replicas 3→1 down to 1 NodeClaim and 1 Node in %s",
		AWSVersion, launched.Round(time.Second), replaced.Round(time.Second), time.Since(scaled).Round(time.Second))
}

// staticCounts returns the names of pool's NodeClaims not being deleted
// (sorted), how many of them are Initialized, and how many are being
// deleted.
func (e *upstreamEnv) staticCounts(ctx context.Context, pool string) (live []string, initialized, deleting int, err error) {
	claims, err := e.claimsOf(ctx, pool)
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
		if conditionTrue(nc, karpv1.ConditionTypeInitialized) {
			initialized++
		}
	}
	slices.Sort(live)
	return live, initialized, deleting, nil
}
