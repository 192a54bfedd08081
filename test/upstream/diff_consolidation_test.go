package upstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Consolidation scenario constants: four m5.large nodes (1,930m of CPU
// allocatable each, Karpenter's and the catalogue's figure), laid out
// one at a time (diffHoldTaint):
//
//	dnd        one 1,400m pod with karpenter.sh/do-not-disrupt: "true"
//	empty      one 1,400m pod, deleted before consolidation starts
//	dest+dest  two 700m pods (their node has 530m free, nobody else's
//	           pods fit there together)
//	under      one 400m pod, which fits on dnd's or dest's node
//
// Then consolidateAfter becomes diffConsolidateAfter. What Karpenter v1.14
// does: the empty node is deleted (Empty), then the under node (its pod
// fits elsewhere: Underutilized, a delete, no replacement); the dnd node
// stays (do-not-disrupt), and dest's stays (its pods fit nowhere else).
const (
	diffConsolidateAfter = 10 * time.Second
	diffConsolidateType  = "m5.large"
	// diffQuiet is how long no NodeClaim may change before a side's
	// decisions are taken as final: Karpenter's disruption poll (10 s)
	// plus its consolidation validation delay (15 s) plus slack.
	diffQuiet = 45 * time.Second
	// diffPodEventLateness bounds how much later than the last pod event
	// either side counts consolidateAfter from, with room to spare: karpx
	// stores the event's time rounded up to the second
	// (disruption.PodEventDedupe) and Karpenter's dedupeTimeout (10 s,
	// pkg/controllers/nodeclaim/podevents/controller.go@v1.14.3) drops a
	// pod event inside it, so Karpenter's lastPodEventTime is never later
	// than the event.
	diffPodEventLateness = 5 * time.Second
)

// TestDifferentialConsolidation compares karpx's and Karpenter's
// consolidation decisions in the same scenario (see diffConsolidateAfter):
// which nodes each removed, in what order, with which reason
// (DisruptionReason condition, DisruptionTerminating event), delete or
// replace, and which stayed.
func TestDifferentialConsolidation(t *testing.T) {
	res := runDiff(t, 10*time.Minute, func(e *diffEnv) map[string]string {
		return e.consolidationScenario()
	})
	compareDiff(t, "consolidation", res)
}

func (e *diffEnv) consolidationScenario() map[string]string {
	t := e.t
	// The empty node has a NodePool of its own, which no other pod
	// selects: whichever of emptiness and consolidation acts first, no pod
	// moves onto it, so the decisions do not hang on their order.
	const pool, emptyPool = "consol", "consol-empty"
	e.createPools(diffPool(pool, diffConsolidateType), diffPool(emptyPool, diffConsolidateType))
	steps := []struct {
		app, pool string
		n         int32
		cpu       string
	}{
		{"dnd", pool, 1, "1400m"}, {"empty", emptyPool, 1, "1400m"}, {"dest", pool, 2, "700m"}, {"under", pool, 1, "400m"},
	}
	for i, s := range steps {
		d := sized(s.app, s.n, s.cpu, "512Mi", map[string]string{"diff": s.pool})
		if s.app == "dnd" {
			d.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		}
		if err := e.kube.Create(e.ctx, d); err != nil {
			t.Fatal(err)
		}
		e.waitPods(s.pool, "default", s.app, int(*d.Spec.Replicas))
		if n := len(e.roles(pool)) + len(e.roles(emptyPool)); n != i+1 {
			t.Fatalf("after %s: %d NodeClaims, want %d (one per step)", s.app, n, i+1)
		}
		if i < len(steps)-1 {
			e.hold(pool, true)
		}
	}
	e.hold(pool, false)
	roles := e.roles(pool)
	maps.Copy(roles, e.roles(emptyPool))
	t.Logf("%s: nodes by their pods: %v", e.side, roles)
	for _, want := range []string{"dnd", "empty", "dest+dest", "under"} {
		if !slices.Contains(mapValues(roles), want) {
			t.Fatalf("no node holds exactly %s: %v", want, roles)
		}
	}
	if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "deployment", "empty", "-n", "default", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	e.eventually(time.Minute, "the empty pod gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "empty"})
		return err == nil && len(pods.Items) == 0, nil
	})
	// Every node has been without pod events for consolidateAfter when it
	// is set, so both sides see all four consolidatable at once
	// (docs/karpenter-differences.md: how each side stamps pod events).
	time.Sleep(diffConsolidateAfter + diffPodEventLateness + 2*time.Second)
	patch := fmt.Sprintf(`{"spec":{"disruption":{"consolidateAfter":%q}}}`, diffConsolidateAfter.String())
	for _, name := range []string{pool, emptyPool} {
		var np karpv1.NodePool
		np.Name = name
		if err := e.kube.Patch(e.ctx, &np, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	e.waitQuiet(diffQuiet, 3*time.Minute, pool, emptyPool)
	return e.consolidationDecisions(roles)
}

// waitQuiet waits until the NodeClaims of pools (names and deletion
// state) have not changed for quiet, and at least one was disrupted, or
// until limit.
func (e *diffEnv) waitQuiet(quiet, limit time.Duration, pools ...string) {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	last, since := "", time.Now()
	for time.Now().Before(deadline) {
		var claims []karpv1.NodeClaim
		for _, pool := range pools {
			c, err := e.claimsOf(e.ctx, pool)
			if err != nil {
				e.t.Fatal(err)
			}
			claims = append(claims, c...)
		}
		var names []string
		for _, nc := range claims {
			names = append(names, fmt.Sprintf("%s:%v", nc.Name, nc.DeletionTimestamp != nil))
		}
		sort.Strings(names)
		now := strings.Join(names, ",")
		if now != last {
			last, since = now, time.Now()
		}
		recorded, _ := e.rec.snapshot()
		disrupted := false
		for _, c := range recorded {
			disrupted = disrupted || !c.Deleting.IsZero()
		}
		if disrupted && time.Since(since) >= quiet {
			return
		}
		time.Sleep(time.Second)
	}
	e.t.Logf("%s: NodeClaims still changing (or none disrupted) after %s; comparing what was seen", e.side, limit)
}

// consolidationDecisions normalises what the recorder saw: per role, kept
// or removed with its reason and events; the order of removals; the
// number of NodeClaims launched after the layout (replacements).
func (e *diffEnv) consolidationDecisions(roles map[string]string) map[string]string {
	claims, _ := e.rec.snapshot()
	events := e.claimEvents("DisruptionTerminating", "DisruptionLaunching", "DisruptionBlocked", "Unconsolidatable")
	out := map[string]string{}
	type removal struct {
		role string
		at   time.Time
	}
	var removed []removal
	launched := 0
	for name, c := range claims {
		role, ok := roles[name]
		if !ok {
			launched++
			continue
		}
		if c.Deleting.IsZero() {
			out["node "+role] = "kept"
		} else {
			out["node "+role] = "removed, reason " + c.DisruptionReason
			removed = append(removed, removal{role, c.Deleting})
		}
		var evs, info []string
		for _, ev := range events[name] {
			// DisruptionBlocked and Unconsolidatable are shown, not
			// compared: when and how often each side explains a
			// non-decision is its own (docs/karpenter-differences.md).
			reason, _, _ := strings.Cut(ev, ": ")
			if reason == "DisruptionTerminating" || reason == "DisruptionLaunching" {
				evs = append(evs, ev)
			} else {
				info = append(info, reason)
			}
		}
		out["events "+role] = strings.Join(evs, "; ")
		out[diffInfo+"events "+role] = strings.Join(slices.Compact(info), "; ")
	}
	sort.Slice(removed, func(i, j int) bool { return removed[i].at.Before(removed[j].at) })
	var order []string
	for _, r := range removed {
		order = append(order, r.role)
	}
	// Shown, not compared: emptiness and consolidation act on different
	// nodes here, and which comes first depends on when each side's pass
	// sees the empty node Consolidatable (under load, Karpenter's own
	// order varied between runs).
	out[diffInfo+"removal order"] = strings.Join(order, " then ")
	out["NodeClaims launched after the layout"] = fmt.Sprint(launched)
	return out
}

// mapValues returns m's values.
func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
