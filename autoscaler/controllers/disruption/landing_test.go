package disruption_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/controllers/disruption"
)

// replacing adds NodeClaim name waiting for its replacement name+"-new",
// Initialized readyAgo ago (a consolidation command between its launch and
// its drain: the Node tainted karpenter.sh/disrupted, the annotations on
// the NodeClaim), with the pod name+"1" of cpu. Nothing else in the pool is
// consolidatable for an hour.
func (c *cluster) replacing(name, cpu string, readyAgo time.Duration) {
	n := c.node(name, "p", time.Minute, map[string]string{
		disruption.ReplacementsAnnotationKey: name + "-new", disruption.ReasonAnnotationKey: disruption.ReasonUnderutilized})
	c.objs[len(c.objs)-1].(*corev1.Node).Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
	c.pod(name+"1", n, cpu, nil)
	c.node(name+"-new", "p", readyAgo, map[string]string{disruption.ReplacementForAnnotationKey: name})
}

func (c *cluster) tainted(node string) bool {
	c.t.Helper()
	var n corev1.Node
	if err := c.kube.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		c.t.Fatal(err)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// A consolidation command's node is drained once its replacement is
// Initialized, but only while no pod moves between nodes (for at most
// ReplacementTimeout after the replacement became Initialized), one node per
// pass, and only when its pods still fit: kube-scheduler may have put
// another command's evicted pod on the empty replacement (in the
// head-to-head a host-anti-affinity pod then waited Pending for a new
// node past the consolidation window). Such a command is abandoned: the
// node stays, untainted, and the replacement, which hosts a pod now,
// stays too. The control is the same cluster with the replacement still
// free: the node is drained.
func TestReplacedNodeIsDrainedOnlyWhenItsPodsStillLand(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(c *cluster)
		// drained is the NodeClaim deleted; kept, those left waiting
		// for their replacements; abandoned, the one given up.
		drained, abandoned string
		kept               []string
	}{
		"replacement free": {
			setup:   func(c *cluster) { c.replacing("b", "1500m", time.Second) },
			drained: "b"},
		"replacement taken by another command's pod": {
			setup: func(c *cluster) {
				c.replacing("b", "1500m", time.Second)
				c.pod("a1", "node-b-new", "1500m", nil)
			},
			abandoned: "b"},
		"replacement taken, room elsewhere": {
			setup: func(c *cluster) {
				c.replacing("b", "1500m", time.Second)
				c.pod("a1", "node-b-new", "1500m", nil)
				c.node("spare", "p", time.Minute, nil)
			},
			drained: "b"},
		"a pod on a draining node still to move": {
			setup: func(c *cluster) {
				c.replacing("b", "1500m", time.Second)
				c.pod("d1", c.node("d", "p", time.Minute, nil), "100m", nil)
				c.leave("d", "claim")
			},
			kept: []string{"b"}},
		"a pod still to move, the replacement Initialized longer than ReplacementTimeout ago": {
			setup: func(c *cluster) {
				c.replacing("b", "1500m", 5*time.Minute+time.Second)
				c.pod("d1", c.node("d", "p", time.Minute, nil), "100m", nil)
				c.leave("d", "claim")
			},
			drained: "b"},
		"two commands ready": {
			setup: func(c *cluster) {
				c.replacing("b", "1500m", time.Second)
				c.replacing("c", "1500m", time.Second)
			},
			drained: "b", kept: []string{"c"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.opts.ReplacementTimeout = 5 * time.Minute
			c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, time.Hour, "100%")
			tc.setup(c)
			c.pass()
			if tc.drained != "" && c.exists(tc.drained) {
				t.Errorf("NodeClaim %s was not drained", tc.drained)
			}
			for _, name := range tc.kept {
				if !c.exists(name) || c.replacementsOf(name) == "" || !c.tainted("node-"+name) {
					t.Errorf("NodeClaim %s: want it kept, still waiting for its replacement", name)
				}
			}
			if tc.abandoned != "" {
				if !c.exists(tc.abandoned) || c.replacementsOf(tc.abandoned) != "" || c.tainted("node-"+tc.abandoned) {
					t.Errorf("NodeClaim %s: want it kept, untainted, its command abandoned", tc.abandoned)
				}
				if !c.exists(tc.abandoned + "-new") {
					t.Errorf("the replacement %s-new, which hosts a pod, was deleted", tc.abandoned)
				}
				found := false
				for len(c.recorder.Events) > 0 && !found {
					found = strings.Contains(<-c.recorder.Events, "DisruptionAbandoned")
				}
				if !found {
					t.Error("no DisruptionAbandoned event")
				}
			}
		})
	}
}
