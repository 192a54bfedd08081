package disruption_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// leave marks node d's NodeClaim ("claim") or its Node ("node") as being
// deleted, as a command's deletion leaves them while the termination
// controller drains the Node, whose pods are still bound to it.
func (c *cluster) leave(name, what string) {
	now := metav1.NewTime(c.now)
	for _, o := range c.objs {
		switch obj := o.(type) {
		case *karpv1.NodeClaim:
			if what == "claim" && obj.Name == name {
				obj.DeletionTimestamp, obj.Finalizers = &now, []string{karpv1.TerminationFinalizer}
			}
		case *corev1.Node:
			if obj.Name == "node-"+name {
				obj.Spec.Taints = append(obj.Spec.Taints, corev1.Taint{Key: karpv1.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule})
				if what == "node" {
					obj.DeletionTimestamp, obj.Finalizers = &now, []string{karpv1.TerminationFinalizer}
				}
			}
		}
	}
}

// The pods of a node that is leaving still need room elsewhere: an empty
// node they will move to is not deleted as empty, and no consolidation
// moves other pods into the room they need (karpx did both, and the pods
// evicted last waited Pending for a new node past the head-to-head's
// consolidation window). The controls: the same clusters without the
// leaving node's pod are consolidated. Since consolidation also waits
// while a draining node's pods are still to move
// (TestConsolidationWaitsForMovingPods), the consolidation half holds by
// either; the simulation's share alone matters for a node that waits for
// its replacements, whose pods do not move yet.
func TestLeavingNodesPodsKeepTheirRoom(t *testing.T) {
	for _, what := range []string{"claim", "node"} {
		for _, withPod := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s leaving, pod %v", what, withPod), func(t *testing.T) {
				// Emptiness: the empty node is where the leaving pod goes.
				c := newCluster(t)
				c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
				d := c.node("d", "p", time.Hour, nil)
				c.node("e", "p", time.Hour, nil)
				if withPod {
					c.pod("d1", d, "1300m", nil)
				}
				c.leave("d", what)
				res := c.pass()
				if c.exists("e") != withPod {
					t.Errorf("leaving pod %v: empty node kept = %v (decisions %v), want %v", withPod, c.exists("e"), res.Decisions, withPod)
				}

				// Consolidation: a1 fits beside b1, but then d1 fits nowhere.
				c = newCluster(t)
				c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
				d = c.node("d", "p", time.Hour, nil)
				a := c.node("a", "p", time.Hour, nil)
				b := c.node("b", "p", time.Hour, nil)
				if withPod {
					c.pod("d1", d, "1300m", nil)
				}
				c.pod("a1", a, "500m", nil)
				c.pod("b1", b, "600m", nil)
				c.leave("d", what)
				res = c.pass()
				kept := c.exists("a") && c.exists("b")
				if kept != withPod {
					t.Errorf("leaving pod %v: a and b both kept = %v (decisions %v), want %v", withPod, kept, res.Decisions, withPod)
				}
			})
		}
	}
}
