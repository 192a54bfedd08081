package karpentermetrics

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
)

// podSeries is every series of the named family keyed by the pod's name
// label, with its full label set.
func podSeries(t *testing.T, reg *prometheus.Registry, name string) (map[string]float64, map[string]map[string]string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals, labels := map[string]float64{}, map[string]map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ls := map[string]string{}
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = lp.GetValue()
			}
			vals[ls[LabelPodName]], labels[ls[LabelPodName]] = m.GetGauge().GetValue(), ls
		}
	}
	return vals, labels
}

func TestPodGauges(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		karpv1.NodePoolLabelKey: "default", corev1.LabelTopologyZone: "us-east-1a", corev1.LabelArchStable: "arm64",
		karpv1.CapacityTypeLabelKey: "spot", corev1.LabelInstanceTypeStable: "m7g.large"}}}
	n9 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n9", Labels: map[string]string{corev1.LabelTopologyZone: "us-east-1b"}}}
	mk := func(name, node string, phase corev1.PodPhase, age time.Duration, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase, Conditions: conds}}
	}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	web := mk("web", "n1", corev1.PodRunning, time.Hour, scheduled, ready)
	web.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4", UID: "u"}}
	unbound := mk("unbound", "", corev1.PodPending, 30*time.Second, unschedulable)
	starting := mk("starting", "n1", corev1.PodPending, time.Minute, scheduled)
	other := mk("other", "n9", corev1.PodRunning, time.Hour, scheduled)
	old := mk("old", "n1", corev1.PodRunning, time.Hour, scheduled) // never seen Pending, not Ready
	done := mk("done", "n1", corev1.PodSucceeded, time.Hour, scheduled)
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(n1, n9, web, unbound, starting, other, old, done).Build()
	c := &StateCollector{Reader: kube, Clock: clk}
	c.Synced.Store(true)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	states, labels := podSeries(t, reg, MetricPodState)
	if want := map[string]float64{"web": 1, "unbound": 1, "starting": 1, "other": 1, "old": 1, "done": 1}; !maps.Equal(states, want) {
		t.Errorf("%s = %v, want %v", MetricPodState, states, want)
	}
	for name, want := range map[string]map[string]string{
		"web": {"name": "web", "namespace": "shop", "owner": "/apis/apps/v1/namespaces/shop/replicasets/web-5d4", "node": "n1", "scheduled": "true",
			"nodepool": "default", "zone": "us-east-1a", "arch": "arm64", "capacity_type": "spot", "instance_type": "m7g.large",
			"phase": "Running", "ready": "true", "managed": "true"},
		"unbound": {"name": "unbound", "namespace": "shop", "owner": "", "node": "", "scheduled": "false", "nodepool": "", "zone": "", "arch": "",
			"capacity_type": "", "instance_type": "", "phase": "Pending", "ready": "false", "managed": "false"},
		"other": {"name": "other", "namespace": "shop", "owner": "", "node": "n9", "scheduled": "true", "nodepool": "", "zone": "us-east-1b", "arch": "",
			"capacity_type": "", "instance_type": "", "phase": "Running", "ready": "false", "managed": "false"},
	} {
		if !maps.Equal(labels[name], want) {
			t.Errorf("%s{%s} labels = %v, want %v", MetricPodState, name, labels[name], want)
		}
	}
	unstarted, _ := podSeries(t, reg, MetricPodUnstartedTimeSeconds)
	if want := map[string]float64{"unbound": 30, "starting": 60}; !maps.Equal(unstarted, want) {
		t.Errorf("first scrape: %s = %v, want %v (old and other were never seen Pending)", MetricPodUnstartedTimeSeconds, unstarted, want)
	}
	unboundT, _ := podSeries(t, reg, MetricPodUnboundTimeSeconds)
	if want := map[string]float64{"unbound": 30}; !maps.Equal(unboundT, want) {
		t.Errorf("first scrape: %s = %v, want %v", MetricPodUnboundTimeSeconds, unboundT, want)
	}

	// starting runs but is not Ready yet: still unstarted, 10 s later.
	clk.SetTime(now.Add(10 * time.Second))
	starting.Status.Phase = corev1.PodRunning
	if err := kube.Status().Update(context.Background(), starting); err != nil {
		t.Fatal(err)
	}
	unstarted, _ = podSeries(t, reg, MetricPodUnstartedTimeSeconds)
	if want := map[string]float64{"unbound": 40, "starting": 70}; !maps.Equal(unstarted, want) {
		t.Errorf("running, not ready: %s = %v, want %v", MetricPodUnstartedTimeSeconds, unstarted, want)
	}
	// Ready: its series goes, and does not come back if it turns unready.
	starting.Status.Conditions = append(starting.Status.Conditions, ready)
	if err := kube.Status().Update(context.Background(), starting); err != nil {
		t.Fatal(err)
	}
	if unstarted, _ = podSeries(t, reg, MetricPodUnstartedTimeSeconds); !maps.Equal(unstarted, map[string]float64{"unbound": 40}) {
		t.Errorf("ready: %s = %v, want only unbound", MetricPodUnstartedTimeSeconds, unstarted)
	}
	starting.Status.Conditions = starting.Status.Conditions[:1]
	if err := kube.Status().Update(context.Background(), starting); err != nil {
		t.Fatal(err)
	}
	if unstarted, _ = podSeries(t, reg, MetricPodUnstartedTimeSeconds); !maps.Equal(unstarted, map[string]float64{"unbound": 40}) {
		t.Errorf("unready after ready: %s = %v, want only unbound", MetricPodUnstartedTimeSeconds, unstarted)
	}
}

func TestPodBoundObservedWhenPendingPodLeavesPendingScheduled(t *testing.T) {
	created := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pod := func(phase corev1.PodPhase, scheduledAfter time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(created)}, Status: corev1.PodStatus{Phase: phase}}
		if scheduledAfter > 0 {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(scheduledAfter))}}
		}
		return p
	}
	hist := func() (uint64, float64, uint64) {
		m := &dto.Metric{}
		if err := PodBoundDurationSeconds.Write(m); err != nil {
			t.Fatal(err)
		}
		var le30 uint64
		for _, b := range m.Histogram.GetBucket() {
			if b.GetUpperBound() == 30 {
				le30 = b.GetCumulativeCount()
			}
		}
		return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), le30
	}
	n0, s0, b0 := hist()
	ObservePodBound(pod(corev1.PodPending, 0), pod(corev1.PodPending, 25*time.Second))              // bound, still Pending: not yet
	ObservePodBound(pod(corev1.PodPending, 25*time.Second), pod(corev1.PodRunning, 25*time.Second)) // leaves Pending: observed
	ObservePodBound(pod(corev1.PodRunning, 25*time.Second), pod(corev1.PodRunning, 25*time.Second)) // already running: not again
	ObservePodBound(pod(corev1.PodPending, 0), pod(corev1.PodFailed, 0))                            // never scheduled: not observed
	n1, s1, b1 := hist()
	if n1-n0 != 1 || s1-s0 != 25 || b1-b0 != 1 {
		t.Errorf("observed %d samples summing %vs (%d in le=30), want 1 of 25s in le=30", n1-n0, s1-s0, b1-b0)
	}
}
