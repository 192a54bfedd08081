package disruption_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
)

func (c *cluster) interruptedAnnotations(drainIn time.Duration) map[string]string {
	return map[string]string{
		cloudprovider.InterruptionAnnotationKey:          "spot_interrupted",
		cloudprovider.InterruptionReclaimAtAnnotationKey: c.now.Add(2 * drainIn).Format(time.RFC3339),
		cloudprovider.InterruptionDrainByAnnotationKey:   c.now.Add(drainIn).Format(time.RFC3339),
	}
}

func (c *cluster) replacementsOf(name string) string {
	c.t.Helper()
	var nc karpv1.NodeClaim
	if err := c.kube.Get(context.Background(), client.ObjectKey{Name: name}, &nc); err != nil {
		c.t.Fatal(err)
	}
	return nc.Annotations[disruption.ReplacementsAnnotationKey]
}

func (c *cluster) setInitialized(name string) {
	c.t.Helper()
	var nc karpv1.NodeClaim
	if err := c.kube.Get(context.Background(), client.ObjectKey{Name: name}, &nc); err != nil {
		c.t.Fatal(err)
	}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	if err := c.kube.Status().Update(context.Background(), &nc); err != nil {
		c.t.Fatal(err)
	}
}

// TestInterruptedNodeIsReplacedFirstWhateverTheBudget: an interrupted node
// whose pod fits nowhere else gets a replacement launched first, even with
// a disruption budget of zero nodes and do-not-disrupt on the pod
// (interruption is forced, as in Karpenter); it is deleted once the
// replacement is Initialized.
func TestInterruptedNodeIsReplacedFirstWhateverTheBudget(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "0")
	n := c.node("doomed", "p", time.Hour, c.interruptedAnnotations(time.Minute))
	c.pod("web", n, "1500m", map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"})
	res := c.pass()
	reps := c.replacementsOf("doomed")
	if reps == "" || len(res.Decisions) != 1 {
		t.Fatalf("decisions %v, replacements %q: want a replacement launched first", res.Decisions, reps)
	}
	c.pass()
	if !c.exists("doomed") {
		t.Fatalf("deleted before its replacement %s was Initialized and before its drain deadline", reps)
	}
	c.setInitialized(reps)
	c.pass()
	if c.exists("doomed") {
		t.Fatal("not deleted after its replacement was Initialized")
	}
}

// TestInterruptedNodeDrainsAtItsDeadlineOrWhenTheReplacementFails: unlike
// consolidation, an interruption is never abandoned: the instance goes
// away anyway. At the drain deadline, or when the replacement is gone, the
// node is deleted (drained) without waiting.
func TestInterruptedNodeDrainsAtItsDeadlineOrWhenTheReplacementFails(t *testing.T) {
	for _, how := range []string{"deadline", "replacement gone"} {
		t.Run(how, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
			n := c.node("doomed", "p", time.Hour, c.interruptedAnnotations(20*time.Second))
			c.pod("web", n, "1500m", nil)
			c.pass()
			reps := c.replacementsOf("doomed")
			if reps == "" {
				t.Fatal("no replacement launched")
			}
			switch how {
			case "deadline":
				c.clock.Step(21 * time.Second)
			default:
				if err := c.kube.Delete(context.Background(), &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: reps}}); err != nil {
					t.Fatal(err)
				}
			}
			c.pass()
			if c.exists("doomed") {
				t.Fatalf("%s: interrupted node not deleted", how)
			}
		})
	}
}

// TestInterruptedNodeIsNeverADestination: an interrupted node's pods move
// to a node with room and it is deleted at once (no replacement needed);
// the other node's pod is never consolidated onto the interrupted one.
func TestInterruptedNodeIsNeverADestination(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
	a := c.node("doomed", "p", time.Hour, c.interruptedAnnotations(time.Minute))
	b := c.node("healthy", "p", time.Hour, nil)
	c.pod("a1", a, "500m", nil)
	c.pod("b1", b, "600m", nil)
	res := c.pass()
	if c.exists("doomed") || !c.exists("healthy") {
		t.Fatalf("decisions %v: want the interrupted node deleted (its pod fits on healthy) and healthy kept", res.Decisions)
	}
	if len(res.Decisions) != 1 || res.Decisions[0] != "interruption/delete: doomed" {
		t.Fatalf("decisions %v, want [interruption/delete: doomed]", res.Decisions)
	}
}
