package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Expiry scenario constants: a NodePool with spec.template.spec.expireAfter
// diffExpireAfter and terminationGracePeriod diffTerminationGrace runs
// two m5.large nodes, one with a plain 1,400m pod and one with a 1,400m
// pod annotated karpenter.sh/do-not-disrupt: "true" whose own
// terminationGracePeriodSeconds is diffPodGrace. Karpenter v1.14 expires
// both at expireAfter whatever do-not-disrupt says (forceful expiry,
// pkg/controllers/nodeclaim/expiration@v1.14.3), evicts the plain pod at
// once, never evicts the do-not-disrupt pod but deletes it at the
// terminationGracePeriod deadline minus its own grace period
// (DeleteExpiringPods, terminator.go@v1.14.3), and the node is gone by
// the deadline.
const (
	diffExpireAfter      = 60 * time.Second
	diffTerminationGrace = 30 * time.Second
	diffPodGrace         = 10 * time.Second
	// diffTimeSlack is how far a measured time may be from the expected
	// one and still be "at" it: the API server's second-granularity
	// timestamps, both controllers' requeues and this recorder's 200 ms
	// polls.
	diffTimeSlack = 6 * time.Second
)

// TestDifferentialExpiry compares karpx's and Karpenter's forceful
// expiry (see diffExpireAfter): which nodes expire and when, whether a
// replacement is launched before the expired node is gone, when the
// plain and the do-not-disrupt pods leave, and whether the node is gone
// by its terminationGracePeriod.
func TestDifferentialExpiry(t *testing.T) {
	res := runDiff(t, 10*time.Minute, func(e *diffEnv) map[string]string {
		return e.expiryScenario()
	})
	compareDiff(t, "expiry", res)
}

func (e *diffEnv) expiryScenario() map[string]string {
	t := e.t
	const pool = "exp"
	np := diffPool(pool, "m5.large")
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration(diffExpireAfter.String())
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: diffTerminationGrace}
	e.createPools(np)
	sel := map[string]string{"diff": pool}
	plain := sized("plain", 1, "1400m", "512Mi", sel)
	dnd := sized("dnd", 1, "1400m", "512Mi", sel)
	dnd.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	dnd.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(diffPodGrace / time.Second))
	if err := e.kube.Create(e.ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Create(e.ctx, dnd); err != nil {
		t.Fatal(err)
	}
	e.waitPods(pool, "default", "plain", 1)
	e.waitPods(pool, "default", "dnd", 1)
	roles := e.roles(pool)
	if len(roles) != 2 {
		t.Fatalf("NodeClaims by their pods: %v, want one for plain and one for dnd", roles)
	}
	claims, err := e.claimsOf(e.ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]time.Time{}
	var last time.Time
	for _, nc := range claims {
		created[nc.Name] = nc.CreationTimestamp.Time
		if at := nc.CreationTimestamp.Add(diffExpireAfter); at.After(last) {
			last = at
		}
	}
	e.eventually(time.Until(last)+diffTerminationGrace+time.Minute, "both NodeClaims expired and gone", func(ctx context.Context) (bool, error) {
		recorded, _ := e.rec.snapshot()
		for name := range roles {
			if recorded[name].Gone.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	recorded, pods := e.rec.snapshot()
	out := map[string]string{}
	for name, role := range roles {
		c := recorded[name]
		expiredAt := c.Deleting.Sub(created[name])
		out["node "+role+" deleted"] = at(expiredAt, diffExpireAfter, "expireAfter")
		out["node "+role+" gone"] = within(c.Gone.Sub(c.Deleting), diffTerminationGrace, "terminationGracePeriod")
		out["node "+role+" DisruptionReason"] = c.DisruptionReason
		for _, p := range pods {
			if p.Node == c.Node && p.App != "" {
				out["pod "+p.App+" left"] = at(p.Leaving.Sub(c.Deleting), leaveExpected(p.App), leaveName(p.App))
			}
		}
		launchedFirst := 0
		for other, oc := range recorded {
			if _, orig := roles[other]; !orig && oc.Seen.Before(c.Gone) && oc.Seen.After(c.Deleting.Add(-diffTimeSlack)) {
				launchedFirst++
			}
		}
		// Shown, not compared: Karpenter's provisioner launches nodes for
		// the pods of a deleting node before they are evicted, karpx's
		// once they are pending (docs/karpenter-differences.md); whether
		// that lands before a fast drain ends is timing.
		out[diffInfo+"node "+role+": NodeClaims launched before it was gone"] = fmt.Sprint(launchedFirst > 0)
	}
	return out
}

// leaveExpected is when, after its NodeClaim's deletion, app's pod should
// leave on Karpenter: the plain pod at once (evicted), the do-not-disrupt
// pod at the terminationGracePeriod deadline minus its own grace.
func leaveExpected(app string) time.Duration {
	if app == "dnd" {
		return diffTerminationGrace - diffPodGrace
	}
	return 0
}

func leaveName(app string) string {
	if app == "dnd" {
		return "terminationGracePeriod - pod grace"
	}
	return "the NodeClaim's deletion"
}

// at says whether d is want (within diffTimeSlack), naming want, or
// prints d.
func at(d, want time.Duration, name string) string {
	if d >= want-diffTimeSlack && d <= want+diffTimeSlack {
		return fmt.Sprintf("at %s (%s)", name, want)
	}
	return fmt.Sprintf("after %s, not at %s (%s)", d.Round(time.Second), name, want)
}

// within says whether d is at most limit (plus diffTimeSlack), or prints d.
func within(d, limit time.Duration, name string) string {
	if d <= limit+diffTimeSlack {
		return fmt.Sprintf("within %s (%s)", name, limit)
	}
	return fmt.Sprintf("after %s, beyond %s (%s)", d.Round(time.Second), name, limit)
}
