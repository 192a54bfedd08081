package termination

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// attachment is a VolumeAttachment on node n1 of PersistentVolume pv
// (nil: an inline volume, no PersistentVolume).
func attachment(name string, pv *string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: "n1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: pv}}}
}

// claim is PersistentVolumeClaim default/name bound to PersistentVolume pv.
func claim(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
}

// withClaim mounts PersistentVolumeClaim name in a pod.
func withClaim(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

// tolerateAll makes a pod tolerate every taint, karpenter.sh/disrupted
// included: the drain leaves it.
func tolerateAll(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

func events(c *NodeController) []string {
	rec := c.recorder.(*record.FakeRecorder)
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	return got
}

// TestReconcileAwaitsVolumeDetachment: a drained Node with a
// VolumeAttachment of a PersistentVolume keeps its instance (no Delete, a
// requeue), its NodeClaim records Karpenter's VolumesDetached=Unknown,
// reason AwaitingVolumeDetachment, and the Node gets the Normal
// AwaitingVolumeDetachment event naming the attachment. Once the
// attachment is deleted (control: the same Node) the instance is
// terminated and VolumesDetached is True.
func TestReconcileAwaitsVolumeDetachment(t *testing.T) {
	cloud := &countingCloud{}
	va := attachment("csi-1", ptr.To("pv-1"))
	c, kube := newNodeController(t, cloud, deletingNode(), registeredClaim(), va)
	res, err := reconcileNode(t, c)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("Reconcile = %+v, %v; want a requeue", res, err)
	}
	if cloud.deletes != 0 || nodeReleased(t, kube) {
		t.Fatalf("with a VolumeAttachment: %d Deletes, released %t; want 0, false", cloud.deletes, nodeReleased(t, kube))
	}
	if cond := claimCondition(t, kube, karpv1.ConditionTypeVolumesDetached); cond == nil || !cond.IsUnknown() || cond.Reason != ReasonAwaitingVolumeDetachment {
		t.Fatalf("VolumesDetached %+v; want Unknown, reason %s", cond, ReasonAwaitingVolumeDetachment)
	}
	want := "Normal AwaitingVolumeDetachment Awaiting deletion of bound volumeattachments (csi-1)"
	if got := events(c); !slices.Contains(got, want) {
		t.Fatalf("events %q; want %q", got, want)
	}
	if err := kube.Delete(context.Background(), va); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileNode(t, c); err != nil {
		t.Fatal(err)
	}
	if cloud.deletes != 1 || !nodeReleased(t, kube) {
		t.Fatalf("once detached: %d Deletes, released %t; want 1, true", cloud.deletes, nodeReleased(t, kube))
	}
	if cond := claimCondition(t, kube, karpv1.ConditionTypeVolumesDetached); cond == nil || !cond.IsTrue() {
		t.Fatalf("once detached: VolumesDetached %+v; want True", cond)
	}
}

// TestReconcileSkipsVolumesTheDrainLeaves: attachments that are not the
// drained pods' do not hold the instance, as Karpenter's
// filterVolumeAttachments: an inline volume's (no PersistentVolume) and
// the volume of a pod tolerating karpenter.sh/disrupted (the drain leaves
// it, so its volume stays attached until the instance goes). The control
// is the same PersistentVolume mounted by an ordinary pod that has left
// (its PersistentVolumeClaim still exists): that attachment is waited for.
func TestReconcileSkipsVolumesTheDrainLeaves(t *testing.T) {
	for _, tt := range []struct {
		name    string
		objs    []client.Object
		wantRun bool
	}{
		{"inline volume", []client.Object{attachment("csi-inline", nil)}, true},
		{"pod left by the drain", []client.Object{attachment("csi-1", ptr.To("pv-1")), claim("data-0", "pv-1"),
			pod("agent", withClaim("data-0"), tolerateAll)}, true},
		{"drained pod's volume (control)", []client.Object{attachment("csi-1", ptr.To("pv-1")), claim("data-0", "pv-1")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := &countingCloud{}
			objs := append([]client.Object{deletingNode(), registeredClaim()}, tt.objs...)
			c, kube := newNodeController(t, cloud, objs...)
			if _, err := reconcileNode(t, c); err != nil {
				t.Fatal(err)
			}
			if got := cloud.deletes == 1 && nodeReleased(t, kube); got != tt.wantRun {
				t.Fatalf("terminated and released: %t, want %t (%d Deletes)", got, tt.wantRun, cloud.deletes)
			}
		})
	}
}

// TestReconcileStopsAwaitingVolumesAtTheDeadline: once the NodeClaim's
// terminationGracePeriod has run out, a remaining attachment no longer
// holds the instance (Karpenter's bound): it is terminated and
// VolumesDetached is False with reason TerminationGracePeriodElapsed. The
// control is the same attachment before the deadline (a grace period of
// an hour): the instance is kept.
func TestReconcileStopsAwaitingVolumesAtTheDeadline(t *testing.T) {
	for _, tt := range []struct {
		name        string
		grace       time.Duration
		wantDeletes int
	}{
		{"deadline passed", 30 * time.Second, 1},
		{"before the deadline (control)", time.Hour, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := &countingCloud{}
			nc := registeredClaim(func(nc *karpv1.NodeClaim) { nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tt.grace} })
			c, kube := newNodeController(t, cloud, deletingNode(), nc, attachment("csi-1", ptr.To("pv-1")))
			if _, err := reconcileNode(t, c); err != nil {
				t.Fatal(err)
			}
			if cloud.deletes != tt.wantDeletes || nodeReleased(t, kube) != (tt.wantDeletes == 1) {
				t.Fatalf("%d Deletes, released %t; want %d", cloud.deletes, nodeReleased(t, kube), tt.wantDeletes)
			}
			cond := claimCondition(t, kube, karpv1.ConditionTypeVolumesDetached)
			wantReason := ReasonTerminationGracePeriodElapsed
			if tt.wantDeletes == 0 {
				wantReason = ReasonAwaitingVolumeDetachment
			}
			if cond == nil || cond.Reason != wantReason || (tt.wantDeletes == 1 && !cond.IsFalse()) {
				t.Fatalf("VolumesDetached %+v; want reason %s", cond, wantReason)
			}
		})
	}
}

// TestAttachmentNames: the event names at most five attachments, then how
// many more, as Karpenter's pretty.Slice(names, 5).
func TestAttachmentNames(t *testing.T) {
	var vas []storagev1.VolumeAttachment
	for _, n := range strings.Fields("a b c d e f g") {
		vas = append(vas, *attachment(n, nil))
	}
	if got, want := attachmentNames(vas[:1]), "a"; got != want {
		t.Errorf("one: %q, want %q", got, want)
	}
	if got, want := attachmentNames(vas), "a, b, c, d, e and 2 other(s)"; got != want {
		t.Errorf("seven: %q, want %q", got, want)
	}
}
