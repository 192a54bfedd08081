package upstream

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Drift scenario: a NodePool limited to m5.large with the disruption
// budget nodes: "1", terminationGracePeriod diffDriftGrace and
// consolidation off runs three nodes (one 1,400m pod each, apps a, b and
// c; c's pod annotated karpenter.sh/do-not-disrupt: "true"). Phase "template": a label is added to
// spec.template.metadata.labels, which changes the NodePool's hash, so
// Karpenter v1.14 marks both NodeClaims Drifted (NodePoolDrifted) and
// replaces them one at a time (c too: see diffDriftGrace), each replacement launched and Initialized
// before its node is deleted. Phase "requirements": the instance-type
// requirement is narrowed to c5.large, which is no part of the hash
// (RequirementsDrifted, areRequirementsDrifted,
// pkg/controllers/nodeclaim/disruption/drift.go@v1.14.3): the m5.large
// replacements are replaced again, one at a time, by c5.large nodes.
const (
	diffDriftType       = "m5.large"
	diffDriftNarrowType = "c5.large"
	// diffDriftPhase bounds each phase: two replacements one after the
	// other.
	diffDriftPhase = 150 * time.Second
	// diffDriftGrace is the NodePool's terminationGracePeriod: node c's
	// pod carries karpenter.sh/do-not-disrupt, which Karpenter's drift (an
	// eventual disruption) does not wait for when the NodeClaim has a
	// terminationGracePeriod (NewCandidate,
	// pkg/controllers/disruption/types.go@v1.14.3); the drain then waits
	// for the pod until this deadline.
	diffDriftGrace = 15 * time.Second
)

// TestDifferentialDrift compares karpx's and Karpenter's drift decisions
// in both phases (see diffDriftType): the Drifted reason of each node,
// the DisruptionReason of its disruption, replace or delete, the
// replacements' instance types, and the most nodes disrupted at once.
func TestDifferentialDrift(t *testing.T) {
	res := runDiff(t, 10*time.Minute, func(e *diffEnv) map[string]string {
		return e.driftScenario()
	})
	compareDiff(t, "drift", res)
}

func (e *diffEnv) driftScenario() map[string]string {
	t := e.t
	const pool = "drift"
	np := diffPool(pool, diffDriftType)
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: diffDriftGrace}
	e.createPools(np)
	sel := map[string]string{"diff": pool}
	for _, app := range diffDriftApps {
		d := sized(app, 1, "1400m", "512Mi", sel)
		if app == "c" {
			d.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		}
		if err := e.kube.Create(e.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range diffDriftApps {
		e.waitPods(pool, "default", app, 1)
	}
	out := map[string]string{}
	e.driftPhase(pool, "template", out, func(np *karpv1.NodePool) {
		np.Spec.Template.Labels["diff-rev"] = "2"
	})
	e.driftPhase(pool, "requirements", out, func(np *karpv1.NodePool) {
		for i, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable {
				np.Spec.Template.Spec.Requirements[i].Values = []string{diffDriftNarrowType}
			}
		}
	})
	return out
}

// diffDriftApps are the drift scenario's apps, one pod and node each.
var diffDriftApps = []string{"a", "b", "c"}

// driftPhase names pool's NodeClaims by their pods, changes the NodePool
// with change, waits until each of them is gone (at most diffDriftPhase)
// and the pods Running again, and adds the phase's normalised decisions
// to out.
func (e *diffEnv) driftPhase(pool, phase string, out map[string]string, change func(*karpv1.NodePool)) {
	t := e.t
	roles := e.roles(pool)
	var np karpv1.NodePool
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: pool}, &np); err != nil {
		t.Fatal(err)
	}
	stored := np.DeepCopy()
	change(&np)
	if err := e.kube.Patch(e.ctx, &np, client.MergeFrom(stored)); err != nil {
		t.Fatal(err)
	}
	// Not a failure here when a node stays: the comparison shows it.
	if !e.until(diffDriftPhase, func() bool {
		recorded, _ := e.rec.snapshot()
		for name := range roles {
			if recorded[name].Gone.IsZero() {
				return false
			}
		}
		return true
	}) {
		t.Logf("%s: phase %s: not every node of %v replaced within %s", e.side, phase, roles, diffDriftPhase)
	}
	for _, app := range diffDriftApps {
		e.waitPods(pool, "default", app, 1)
	}
	recorded, _ := e.rec.snapshot()
	events := e.claimEvents("DisruptionTerminating", "DisruptionLaunching")
	terminating := e.claimEvents("DisruptionTerminating")
	var names []string
	var overlap bool
	for name, role := range roles {
		c := recorded[name]
		names = append(names, name)
		out[phase+": node "+role+" Drifted"] = c.Drifted
		out[phase+": node "+role+" gone"] = fmt.Sprint(!c.Gone.IsZero())
		out[phase+": node "+role+" DisruptionReason"] = c.DisruptionReason
		// Its own DisruptionLaunching, when it was itself a replacement
		// in the phase before, is not this phase's decision.
		out[phase+": node "+role+" events"] = strings.Join(terminating[name], "; ")
		for other := range roles {
			o := recorded[other]
			overlap = overlap || (other != name && !c.Terminating.IsZero() && !o.Tainted.IsZero() &&
				o.Tainted.After(c.Terminating) && (c.Gone.IsZero() || o.Tainted.Before(c.Gone)))
		}
	}
	// Shown, not compared: whether one node's disruption began after the
	// previous one's instance was terminating but before it was gone
	// depends on how long ec2sim takes to terminate it.
	out[diffInfo+phase+": next node disrupted while the previous instance terminated"] = fmt.Sprint(overlap)
	// Replacements: the NodeClaims that appeared while this phase's
	// nodes were being disrupted, their types and launch events.
	var types, launching []string
	replacedFirst := 0
	for name, c := range recorded {
		if _, old := roles[name]; old || !c.ReplacementFor || !inPhase(c, recorded, roles) {
			continue
		}
		types = append(types, c.InstanceType)
		launching = append(launching, events[name]...)
		replacedFirst++
	}
	sort.Strings(types)
	sort.Strings(launching)
	out[phase+": replacements launched while disrupting"] = fmt.Sprint(replacedFirst)
	out[phase+": replacement instance types"] = strings.Join(types, ",")
	out[phase+": replacement events"] = strings.Join(slices.Compact(launching), "; ")
	out[phase+": most nodes disrupted at once"] = fmt.Sprint(maxConcurrentDisruptions(recorded, names))
}

// inPhase reports whether c appeared after the first of the phase's nodes
// (roles) began its disruption and before the last was gone.
func inPhase(c claimRecord, recorded map[string]claimRecord, roles map[string]string) bool {
	var first, last time.Time
	for name := range roles {
		r := recorded[name]
		start := r.Deleting
		if !r.Tainted.IsZero() && r.Tainted.Before(start) {
			start = r.Tainted
		}
		if first.IsZero() || start.Before(first) {
			first = start
		}
		if r.Gone.After(last) {
			last = r.Gone
		}
	}
	return !c.Seen.Before(first) && !c.Seen.After(last)
}
