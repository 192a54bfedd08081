package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// claimAt is a NodeClaim created at t0 whose conditions (in order
// Launched, Registered, Initialized) turned True at the given times.
func claimAt(t0 time.Time, at ...time.Time) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu-abc", CreationTimestamp: metav1.NewTime(t0)}}
	for i, typ := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized}[:len(at)] {
		nc.StatusConditions().SetTrue(typ)
		for j := range nc.Status.Conditions {
			if nc.Status.Conditions[j].Type == typ {
				nc.Status.Conditions[j].LastTransitionTime = metav1.NewTime(at[i])
			}
		}
	}
	return nc
}

func TestNominationHoldsWithinEachPhaseTTL(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	deleting := claimAt(t0)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	for name, tc := range map[string]struct {
		nc   *karpv1.NodeClaim
		now  time.Time
		want bool
	}{
		"launching within launch TTL":         {claimAt(t0), m(4), true},
		"launching past launch TTL":           {claimAt(t0), m(5), false},
		"launched within registration TTL":    {claimAt(t0, m(1)), m(15), true},
		"launched past registration TTL":      {claimAt(t0, m(1)), m(16), false},
		"registered within the grace":         {claimAt(t0, m(1), m(2)), m(6), true},
		"registered past the grace":           {claimAt(t0, m(1), m(2)), m(7), false},
		"initialized: the nomination is over": {claimAt(t0, m(1), m(2), m(3)), m(3), false},
		"deleting":                            {deleting, t0, false},
		"gone":                                {nil, t0, false},
	} {
		if got := NominationHolds(tc.nc, tc.now, 5*time.Minute, 15*time.Minute, 5*time.Minute); got != tc.want {
			t.Errorf("%s: NominationHolds = %v, want %v", name, got, tc.want)
		}
	}
}

func TestWaitForNominationsReservesRoomOnTheClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}
	}
	waiting, fresh, stale := pod("waiting"), pod("fresh"), pod("stale")
	nc := claimAt(t0, t0)
	state := &clusterstate.Snapshot{NodeClaims: map[string]*karpv1.NodeClaim{nc.Name: nc}, Nodes: map[string]*corev1.Node{},
		NodeClaimOf: map[string]*karpv1.NodeClaim{}}
	in := scheduling.Input{ExistingNodes: []scheduling.ExistingNode{{Name: "nodeclaim/" + nc.Name,
		Available: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}}}}
	p := &Provisioner{opts: Options{}}
	p.opts.defaults()
	p.nominated.set(waiting.UID, nc.Name)
	p.nominated.set(stale.UID, "deleted-claim")
	p.nominated.set("bound-meanwhile", nc.Name)

	plan, n := p.waitForNominations(state, in, []*corev1.Pod{waiting, fresh, stale}, t0.Add(time.Minute))
	if n != 1 || len(plan) != 2 || plan[0] != fresh || plan[1] != stale {
		t.Fatalf("planned %d pods (%d waiting), want fresh and stale planned and 1 waiting", len(plan), n)
	}
	if q := in.ExistingNodes[0].Available["nvidia.com/gpu"]; !q.IsZero() {
		t.Fatalf("nvidia.com/gpu left on the claim %s, want 0: the waiting pod's GPU is reserved", q.String())
	}
	if p.nominated.get(stale.UID) != "" || p.nominated.get("bound-meanwhile") != "" {
		t.Fatal("nominations to a gone claim, or of pods no longer pending, are kept")
	}
}

func TestPodNamesForTheLog(t *testing.T) {
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b", "c"} {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}})
	}
	if got, want := podNames(pods, 5), "ns/a, ns/b, ns/c"; got != want {
		t.Errorf("podNames = %q, want %q", got, want)
	}
	if got, want := podNames(pods, 2), "ns/a, ns/b and 1 more"; got != want {
		t.Errorf("podNames(max 2) = %q, want %q", got, want)
	}
}
