package disruption_test

import (
	"context"
	"maps"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
)

// TestDriftReasons: the Drifted condition a pass writes carries the reason
// Karpenter v1.14's drift controller writes for the same NodeClaim and
// NodePool (pkg/controllers/nodeclaim/disruption/drift.go): none for a
// NodeClaim as Karpenter launches it (its nodepool-hash annotations equal
// the NodePool's hash), NodePoolDrifted for another hash at the same hash
// version and none at another version, RequirementsDrifted when the
// NodePool's requirements no longer admit its labels (narrowed capacity
// type, a custom label's values, a Gt bound; a NotIn on a label it lacks
// does not drift), and InstanceTypeNotFound for a type no longer served,
// only once the NodeClaim is older than an hour.
func TestDriftReasons(t *testing.T) {
	spotOnly := []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}
	for name, tc := range map[string]struct {
		pool func(*karpv1.NodePool)
		nc   func(*karpv1.NodeClaim, *karpv1.NodePool)
		want string
	}{
		"as Karpenter launched it": {nc: func(nc *karpv1.NodeClaim, np *karpv1.NodePool) {
			nc.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: np.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
		}},
		"template changed": {want: cloudprovider.DriftReasonNodePool, nc: func(nc *karpv1.NodeClaim, np *karpv1.NodePool) {
			nc.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: "1", karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
		}},
		"template hash of another version": {nc: func(nc *karpv1.NodeClaim, np *karpv1.NodePool) {
			nc.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: "1", karpv1.NodePoolHashVersionAnnotationKey: "v2"}
		}},
		"capacity type narrowed to spot": {want: cloudprovider.DriftReasonRequirements, pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, spotOnly...)
		}},
		"custom label's values narrowed": {want: cloudprovider.DriftReasonRequirements, pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}})
		}, nc: func(nc *karpv1.NodeClaim, _ *karpv1.NodePool) { nc.Labels["team"] = "a" }},
		"requirement on a label it lacks": {want: cloudprovider.DriftReasonRequirements, pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpExists})
		}},
		"NotIn on a label it lacks": {pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b"}})
		}},
		"generation bound raised": {want: cloudprovider.DriftReasonRequirements, pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"5"}})
		}, nc: func(nc *karpv1.NodeClaim, _ *karpv1.NodePool) {
			nc.Labels["karpenter.k8s.aws/instance-generation"] = "5"
		}},
		"type no longer served, 2h old": {want: cloudprovider.DriftReasonInstanceTypeNotFound, pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = nil
		}, nc: func(nc *karpv1.NodeClaim, _ *karpv1.NodePool) {
			nc.Labels[corev1.LabelInstanceTypeStable] = "m4.large"
			nc.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
		}},
		"type no longer served, 30m old": {pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = nil
		}, nc: func(nc *karpv1.NodeClaim, _ *karpv1.NodePool) {
			nc.Labels[corev1.LabelInstanceTypeStable] = "m4.large"
			nc.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 22, 11, 30, 0, 0, time.UTC))
		}},
		"no offering in its zone, 2h old": {want: cloudprovider.DriftReasonInstanceTypeNotFound, nc: func(nc *karpv1.NodeClaim, _ *karpv1.NodePool) {
			nc.Labels[corev1.LabelTopologyZone] = "us-east-1f"
			nc.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
		}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			// Never consolidated or replaced within the pass: only the
			// condition is looked at.
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, time.Hour, "0")
			np := c.objs[len(c.objs)-1].(*karpv1.NodePool)
			n := c.node("n", "p", 3*time.Hour, nil)
			c.pod("web", n, "500m", nil)
			nc := c.objs[len(c.objs)-3].(*karpv1.NodeClaim)
			nc.CreationTimestamp = metav1.NewTime(c.now.Add(-3 * time.Hour))
			if tc.pool != nil {
				tc.pool(np)
			}
			if tc.nc != nil {
				tc.nc(nc, np)
			}
			c.pass()
			var got karpv1.NodeClaim
			if err := c.kube.Get(context.Background(), client.ObjectKey{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			cond := got.StatusConditions().Get(karpv1.ConditionTypeDrifted)
			switch {
			case tc.want == "" && cond != nil:
				t.Fatalf("Drifted %s (%s); want no Drifted condition", cond.Status, cond.Reason)
			case tc.want != "" && (cond == nil || !cond.IsTrue() || cond.Reason != tc.want):
				t.Fatalf("Drifted condition %+v; want True with reason %s", cond, tc.want)
			}
		})
	}
}

// TestDisruptionEventsAreKarpenters: the disruption events carry
// Karpenter v1.14's reasons and messages (pkg/controllers/disruption/
// events): an empty node deleted gets DisruptionTerminating "Disrupting
// Node: Empty" and its NodeClaim "Disrupting NodeClaim: Empty"; a drifted
// node's replacement gets DisruptionLaunching "Launching NodeClaim:
// Drifted" and, while not Initialized, DisruptionWaitingReadiness.
func TestDisruptionEventsAreKarpenters(t *testing.T) {
	events := func(c *cluster) []string {
		var out []string
		for len(c.recorder.Events) > 0 {
			out = append(out, <-c.recorder.Events)
		}
		return out
	}
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
	c.node("empty", "p", time.Hour, nil)
	c.pass()
	got := events(c)
	for _, want := range []string{"Normal DisruptionTerminating Disrupting Node: Empty", "Normal DisruptionTerminating Disrupting NodeClaim: Empty"} {
		if !contains(got, want) {
			t.Errorf("empty node deleted: events %q; want %q", got, want)
		}
	}

	c = newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
	// The fake client leaves the replacement's creationTimestamp zero:
	// no timeout may count from it.
	c.opts.ReplacementTimeout = math.MaxInt64
	n := c.node("old", "p", 3*time.Hour, map[string]string{karpv1.NodePoolHashAnnotationKey: "1", karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion})
	c.pod("web", n, "1500m", nil)
	c.pass()
	c.pass()
	got = events(c)
	for _, want := range []string{"Normal DisruptionLaunching Launching NodeClaim: Drifted", "Normal DisruptionWaitingReadiness Waiting on readiness to continue disruption"} {
		if !contains(got, want) {
			t.Errorf("drifted node replaced: events %q; want %q", got, want)
		}
	}
}

// TestDriftOfDoNotDisruptPodWithTerminationGracePeriod: drift is an
// eventual disruption in Karpenter v1.14 (NewCandidate,
// pkg/controllers/disruption/types.go@v1.14.3): a pod's
// karpenter.sh/do-not-disrupt (or a PodDisruptionBudget) does not hold a
// drifted NodeClaim that has a spec.terminationGracePeriod, whose drain
// is bounded by it; the node is replaced first. The control: the same
// node without terminationGracePeriod waits, and do-not-disrupt on the
// NodeClaim holds it either way. TestDifferentialDrift compares it with
// the real Karpenter.
func TestDriftOfDoNotDisruptPodWithTerminationGracePeriod(t *testing.T) {
	drifted := map[string]string{karpv1.NodePoolHashAnnotationKey: "launched-from-an-older-template",
		karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
	for name, tc := range map[string]struct {
		grace       *metav1.Duration
		nodeClaimDo bool
		replaced    bool
	}{
		"terminationGracePeriod set":                 {grace: &metav1.Duration{Duration: time.Minute}, replaced: true},
		"no terminationGracePeriod (control)":        {},
		"do-not-disrupt on the NodeClaim, grace set": {grace: &metav1.Duration{Duration: time.Minute}, nodeClaimDo: true},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
			annotations := maps.Clone(drifted)
			if tc.nodeClaimDo {
				annotations[karpv1.DoNotDisruptAnnotationKey] = "true"
			}
			n := c.node("old", "p", 3*time.Hour, annotations)
			c.objs[len(c.objs)-2].(*karpv1.NodeClaim).Spec.TerminationGracePeriod = tc.grace
			c.pod("web", n, "1500m", map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"})
			res := c.pass()
			var got karpv1.NodeClaim
			if err := c.kube.Get(context.Background(), client.ObjectKey{Name: "old"}, &got); err != nil {
				t.Fatal(err)
			}
			if replaced := got.Annotations[disruption.ReplacementsAnnotationKey] != ""; replaced != tc.replaced {
				t.Errorf("replaced %v (decisions %v), want %v", replaced, res.Decisions, tc.replaced)
			}
		})
	}
}

// TestEmptyDriftedNodeIsDeletedAsEmpty: Karpenter v1.14 tries emptiness
// before drift (NewMethods, pkg/controllers/disruption/controller.go@v1.14.3),
// so a node that is both empty (and consolidatable) and drifted is deleted
// with reason Empty, not Drifted; the control, the same drifted node not
// yet consolidatable, is disrupted as Drifted.
func TestEmptyDriftedNodeIsDeletedAsEmpty(t *testing.T) {
	drifted := map[string]string{karpv1.NodePoolHashAnnotationKey: "launched-from-an-older-template",
		karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
	for name, tc := range map[string]struct {
		consolidateAfter time.Duration
		want             string
	}{
		"consolidatable":                   {consolidateAfter: 30 * time.Second, want: "emptiness/delete: old"},
		"not yet consolidatable (control)": {consolidateAfter: 5 * time.Hour, want: "drift/delete: old"},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, tc.consolidateAfter, "100%")
			c.node("old", "p", time.Hour, maps.Clone(drifted))
			if res := c.pass(); len(res.Decisions) != 1 || res.Decisions[0] != tc.want {
				t.Fatalf("decisions %v, want [%s]", res.Decisions, tc.want)
			}
		})
	}
}

// TestBudgetFreedOnceInstanceTerminating: with budget nodes "1", a
// NodeClaim being deleted holds the budget until its instance is
// terminating (InstanceTerminating=True), as Karpenter v1.14 counts it
// (BuildDisruptionBudgetMapping, pkg/controllers/disruption/helpers.go@v1.14.3);
// the control, still draining, holds it.
func TestBudgetFreedOnceInstanceTerminating(t *testing.T) {
	for name, tc := range map[string]struct {
		terminating bool
		want        int
	}{
		"previous node's instance terminating": {terminating: true, want: 1},
		"previous node draining (control)":     {want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 30*time.Second, "1")
			c.node("leaving", "p", time.Hour, nil)
			leaving := c.objs[len(c.objs)-2].(*karpv1.NodeClaim)
			now := metav1.NewTime(c.now)
			leaving.DeletionTimestamp = &now
			leaving.Finalizers = []string{karpv1.TerminationFinalizer}
			if tc.terminating {
				leaving.StatusConditions().SetTrue(karpv1.ConditionTypeInstanceTerminating)
			}
			c.node("empty", "p", time.Hour, nil)
			if res := c.pass(); len(res.Decisions) != tc.want {
				t.Fatalf("decisions %v, want %d", res.Decisions, tc.want)
			}
		})
	}
}
