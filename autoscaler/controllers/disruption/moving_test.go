package disruption_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/controllers/disruption"
)

// Consolidation starts no command while a pod moves between nodes: one
// bound to a draining node and about to be evicted, one terminating there
// (for PodMoveWindow), one kube-scheduler has not judged yet (for
// PodMoveWindow). kube-scheduler places such pods by its own scores, so a
// command decided meanwhile could plan the next drain's pods into room
// they take (the head-to-head's 500-pod consolidation left a
// host-anti-affinity pod Pending that way). Without a moving pod, or when
// the pod cannot move now (a PodDisruptionBudget refuses its eviction, it
// has karpenter.sh/do-not-disrupt) or has waited longer than the window,
// node a or b is consolidated: a1 and the small pod both fit beside b1.
func TestConsolidationWaitsForMovingPods(t *testing.T) {
	// How long before the pass a move started: 1 s before the window's
	// end, and 1 s after it.
	inside, past := -(disruption.PodMoveWindow - time.Second), -(disruption.PodMoveWindow + time.Second)
	for name, tc := range map[string]struct {
		// draining, when set, shapes pod d1 on the draining node d;
		// pending, when set, shapes the unbound pod w.
		draining, pending func(now time.Time, p *corev1.Pod)
		pdb               bool
		held              bool
	}{
		"nothing moving": {held: false},
		"pod on a draining node": {
			draining: func(time.Time, *corev1.Pod) {}, held: true},
		"pod on a draining node, eviction refused by a PodDisruptionBudget": {
			draining: func(time.Time, *corev1.Pod) {}, pdb: true, held: false},
		"pod on a draining node, do-not-disrupt": {
			draining: func(_ time.Time, p *corev1.Pod) {
				p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			}, held: false},
		"pod terminating on a draining node, inside the window": {
			draining: func(now time.Time, p *corev1.Pod) { terminating(p, now.Add(inside), 30) }, held: true},
		"pod terminating on a draining node, past the window": {
			draining: func(now time.Time, p *corev1.Pod) { terminating(p, now.Add(past), 30) }, held: false},
		"pending pod not judged, inside the window": {
			pending: func(now time.Time, p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(inside)) }, held: true},
		"pending pod judged unschedulable, inside the window": {
			pending: func(now time.Time, p *corev1.Pod) {
				p.CreationTimestamp = metav1.NewTime(now.Add(inside))
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
			}, held: false},
		"pending pod not judged, past the window": {
			pending: func(now time.Time, p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(past)) }, held: false},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
			c.halfEmptyPair("p")
			if tc.draining != nil {
				d := c.node("d", "p", time.Hour, nil)
				c.pod("d1", d, "100m", nil)
				tc.draining(c.now, c.objs[len(c.objs)-1].(*corev1.Pod))
				c.leave("d", "claim")
			}
			if tc.pending != nil {
				c.pod("w", "", "100m", nil)
				tc.pending(c.now, c.objs[len(c.objs)-1].(*corev1.Pod))
			}
			if tc.pdb {
				for _, o := range c.objs {
					if p, ok := o.(*corev1.Pod); ok && p.Name == "d1" {
						p.Labels = map[string]string{"app": "d"}
					}
				}
				zero := intstr.FromInt32(0)
				c.objs = append(c.objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default"},
					Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}}},
					Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}})
			}
			res := c.pass()
			held := c.exists("a") && c.exists("b")
			if held != tc.held {
				t.Errorf("a and b both kept = %v (decisions %v), want %v", held, res.Decisions, tc.held)
			}
		})
	}
}

// terminating marks p deleted at requested with a grace period of grace
// seconds, as the API server does on an eviction.
func terminating(p *corev1.Pod, requested time.Time, grace int64) {
	at := metav1.NewTime(requested.Add(time.Duration(grace) * time.Second))
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds, p.Finalizers = &at, &grace, []string{"test/keep"}
}
