package termination

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func newDrainer(t *testing.T, now time.Time, objs ...client.Object) (*Drainer, client.Client) {
	t.Helper()
	kube := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	return NewDrainer(kube, record.NewFakeRecorder(100), clocktesting.NewFakePassiveClock(now)), kube
}

func remaining(t *testing.T, kube client.Client) map[string]bool {
	t.Helper()
	var pods corev1.PodList
	if err := kube.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		out[p.Name] = true
	}
	return out
}

// TestDrainEvictsInKarpentersTiers checks what a drain removes and in
// which order, as Karpenter v1.14's terminator does: non-critical pods,
// then non-critical DaemonSet pods, then critical pods, then critical
// DaemonSet pods, each tier once the one before is gone; never pods that
// tolerate the disrupted taint (they would come straight back), mirror or
// finished pods. The control is the old two-tier drain, which evicted the
// tolerating pod and never a DaemonSet pod.
func TestDrainEvictsInKarpentersTiers(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	daemon := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", APIVersion: "apps/v1", UID: "u", Controller: ptr.To(true)}}
	}
	critical := func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }
	objs := []client.Object{
		pod("critical-daemon", critical, daemon),
		pod("critical", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }),
		pod("daemon", daemon),
		pod("web"),
		pod("web2"),
		pod("tolerant", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
		}),
		pod("mirror", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("elsewhere", func(p *corev1.Pod) { p.Spec.NodeName = "n2" }),
	}
	d, kube := newDrainer(t, time.Now(), objs...)
	ctx := context.Background()
	for i, want := range [][]string{{"web", "web2"}, {"daemon"}, {"critical"}, {"critical-daemon"}} {
		before := remaining(t, kube)
		st, err := d.Drain(ctx, node, nil)
		if err != nil || st.Done || st.Evicted != len(want) {
			t.Fatalf("pass %d: %+v %v; want %v evicted and not done", i+1, st, err, want)
		}
		after := remaining(t, kube)
		for _, name := range want {
			if !before[name] || after[name] {
				t.Fatalf("pass %d: want %v evicted; left %v", i+1, want, after)
			}
		}
	}
	st, err := d.Drain(ctx, node, nil)
	if err != nil || !st.Done {
		t.Fatalf("last pass: %+v %v, want done", st, err)
	}
	for _, name := range []string{"tolerant", "mirror", "done", "elsewhere"} {
		if !remaining(t, kube)[name] {
			t.Errorf("pod %s must not be removed by the drain", name)
		}
	}
}

// TestDrainLeavesDoNotDisruptPodsToTheDeadline: a pod whose
// karpenter.sh/do-not-disrupt is active is not evicted, even in a forced
// drain; the drain waits for it and, with a terminationGracePeriod,
// deletes it once its grace period would end after the deadline. One
// whose duration protection has run out is evicted.
func TestDrainLeavesDoNotDisruptPodsToTheDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	started := metav1.NewTime(now.Add(-time.Hour))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	held := pod("held", func(p *corev1.Pod) {
		p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	})
	expired := pod("expired", func(p *corev1.Pod) {
		p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "30m"}
		p.Status.StartTime = &started
	})
	d, kube := newDrainer(t, now, held, expired)
	st, err := d.Drain(context.Background(), node, nil)
	if err != nil || st.Evicted != 1 || st.Done || len(st.Protected) != 1 || remaining(t, kube)["expired"] || !remaining(t, kube)["held"] {
		t.Fatalf("no deadline: %+v %v; want the expired protection evicted, held kept and waited for", st, err)
	}
	deadline := now.Add(10 * time.Minute)
	if st, err := d.Drain(context.Background(), node, &deadline); err != nil || st.Deleted != 0 || !remaining(t, kube)["held"] {
		t.Fatalf("deadline 10m away: %+v %v; want held kept", st, err)
	}
	deadline = now.Add(20 * time.Second)
	if st, err := d.Drain(context.Background(), node, &deadline); err != nil || st.Deleted != 1 || remaining(t, kube)["held"] {
		t.Fatalf("deadline within held's 30 s grace: %+v %v; want held deleted", st, err)
	}
}

// TestDrainDeletesPodsAtTheTerminationDeadline checks that a pod whose own
// grace period would end after the NodeClaim's deadline is deleted rather
// than evicted, and one with time left is evicted.
func TestDrainDeletesPodsAtTheTerminationDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	long := pod("long", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600) })
	short := pod("short", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5) })
	d, _ := newDrainer(t, now, long, short)
	deadline := now.Add(time.Minute)
	st, err := d.Drain(context.Background(), node, &deadline)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 1 || st.Evicted != 1 {
		t.Fatalf("got %+v, want the 600-s pod deleted and the 5-s pod evicted", st)
	}
}
