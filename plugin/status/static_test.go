package status

import (
	"bytes"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// staticClaim is NodeClaim name of pool, Initialized when init, being
// deleted when deleting.
func staticClaim(name, pool string, init, deleting bool) karpv1.NodeClaim {
	nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
		Status: karpv1.NodeClaimStatus{NodeName: "node-" + name}}
	if init {
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	}
	if deleting {
		nc.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	}
	return nc
}

// TestPrintStatic: one line per static NodePool with desired and current
// counts; a dynamic NodePool is not listed, and nothing is printed when
// no NodePool is static.
func TestPrintStatic(t *testing.T) {
	pools := []karpv1.NodePool{
		{ObjectMeta: metav1.ObjectMeta{Name: "dynamic"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "steady"}, Spec: karpv1.NodePoolSpec{Replicas: ptr[int64](2)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "growing"}, Spec: karpv1.NodePoolSpec{Replicas: ptr[int64](3),
			Limits: karpv1.Limits{"nodes": resource.MustParse("4")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shrinking"}, Spec: karpv1.NodePoolSpec{Replicas: ptr[int64](1)}},
	}
	claims := []karpv1.NodeClaim{
		staticClaim("d1", "dynamic", true, false),
		staticClaim("s1", "steady", true, false), staticClaim("s2", "steady", true, false),
		staticClaim("g1", "growing", true, false), staticClaim("g2", "growing", false, false), staticClaim("g3", "growing", true, true),
		staticClaim("k1", "shrinking", true, false), staticClaim("k2", "shrinking", true, false), staticClaim("k3", "shrinking", true, false),
	}
	var out bytes.Buffer
	printStatic(&out, pools, claims)
	want := `
Static NodePools (spec.replicas):
  steady: desired 2, current 2 (ready 2), deleting 0
  growing: desired 3, current 2 (ready 1), deleting 1, limits.nodes 4; launching 1
  shrinking: desired 1, current 3 (ready 3), deleting 0; scaling in 2
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	printStatic(&out, pools[:1], claims)
	if out.Len() != 0 {
		t.Fatalf("no static NodePool printed %q", out.String())
	}
}

// TestEmptyNodesLeaveStaticOut: an empty node of a static NodePool is not
// an empty node waiting for consolidation (static NodePools are never
// consolidated); the same node of a dynamic NodePool is.
func TestEmptyNodesLeaveStaticOut(t *testing.T) {
	after := karpv1.MustParseNillableDuration("0s")
	pools := []karpv1.NodePool{
		{ObjectMeta: metav1.ObjectMeta{Name: "dynamic"}, Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{ConsolidateAfter: after}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "static"}, Spec: karpv1.NodePoolSpec{Replicas: ptr[int64](1), Disruption: karpv1.Disruption{ConsolidateAfter: after}}},
	}
	claims := []karpv1.NodeClaim{staticClaim("d", "dynamic", true, false), staticClaim("s", "static", true, false)}
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-d"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-s"}}}
	rows := emptyNodes(pools, claims, nodes, nil, clock.RealClock{})
	if len(rows) != 1 || rows[0].claim.Name != "d" {
		names := []string{}
		for _, r := range rows {
			names = append(names, r.claim.Name)
		}
		t.Fatalf("empty nodes %v; want [d]", names)
	}
}
