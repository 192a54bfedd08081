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

// TestDrainEvictsInOrderAndLeavesDaemonAndMirrorPods checks what a drain
// removes and in which order: regular pods first, pods that tolerate the
// disrupted taint only once the others are gone, never DaemonSet, mirror
// or finished pods.
func TestDrainEvictsInOrderAndLeavesDaemonAndMirrorPods(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	objs := []client.Object{
		pod("web"),
		pod("tolerant", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
		}),
		pod("daemon", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", APIVersion: "apps/v1", UID: "u", Controller: ptr.To(true)}}
		}),
		pod("mirror", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("elsewhere", func(p *corev1.Pod) { p.Spec.NodeName = "n2" }),
	}
	d, kube := newDrainer(t, time.Now(), objs...)
	ctx := context.Background()

	st, err := d.Drain(ctx, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Done || st.Evicted != 1 {
		t.Fatalf("first pass: %+v, want one eviction and not done", st)
	}
	left := remaining(t, kube)
	if left["web"] || !left["tolerant"] {
		t.Fatalf("first pass must evict web and keep tolerant: left %v", left)
	}
	st, err = d.Drain(ctx, node, nil)
	if err != nil || st.Evicted != 1 || remaining(t, kube)["tolerant"] {
		t.Fatalf("second pass: %+v %v, want tolerant evicted", st, err)
	}
	st, err = d.Drain(ctx, node, nil)
	if err != nil || !st.Done {
		t.Fatalf("third pass: %+v %v, want done", st, err)
	}
	for _, name := range []string{"daemon", "mirror", "done", "elsewhere"} {
		if !remaining(t, kube)[name] {
			t.Errorf("pod %s must not be removed by the drain", name)
		}
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
