package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/controllers/termination"
)

// volumeGrace is the NodePool's terminationGracePeriod in
// TestTerminationAwaitsVolumeDetachment: the bound of the wait.
const volumeGrace = 60 * time.Second

// TestTerminationAwaitsVolumeDetachment deletes two NodeClaims whose Nodes
// each have a VolumeAttachment (of a PersistentVolume, as the EBS CSI
// driver's attachments are), on the real API server, and checks Karpenter
// v1.14's wait (awaitVolumeDetachment, pkg/controllers/node/termination/
// controller.go): both drain, record VolumesDetached=Unknown with reason
// AwaitingVolumeDetachment and a Normal AwaitingVolumeDetachment event on
// the Node, and keep their instances; deleting node A's attachment lets A's
// instance go at once (the VolumeAttachment watch wakes the termination),
// while B's, never detached, is terminated only once the NodeClaim's
// terminationGracePeriod (60 s) has run out. Karpenter's node termination
// metrics count both Nodes (drained, terminated, one termination-duration
// and one lifetime observation each). The control is the same test
// on karpx before the wait (its instances were terminated right after the
// drain, seconds after the deletion).
func TestTerminationAwaitsVolumeDetachment(t *testing.T) {
	runInParallel(t)
	e := newEnv(t, "karpx-volumes")
	e.apply(ec2NodeClassYAML("vol", e.name), fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: vol}
spec:
  disruption: %s
  template:
    metadata: {labels: {vol: "yes"}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: vol}
      terminationGracePeriod: %s
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
`, neverConsolidate, volumeGrace))
	// One pod fills an m5.xlarge: two NodeClaims.
	web := deployment("web", 2, "3", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"vol": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web Running on two nodes", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 2, nil
	})
	// The pods leave first, so nothing is provisioned for them again.
	if _, err := e.cluster.Kubectl(e.ctx, nil, "scale", "deployment", "web", "-n", "default", "--replicas=0"); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "web gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"})
		return err == nil && len(pods.Items) == 0, err
	})
	var list karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: "vol"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d NodeClaims, want 2", len(list.Items))
	}
	a, b := list.Items[0], list.Items[1]
	vas := map[string]*storagev1.VolumeAttachment{}
	for _, nc := range []karpv1.NodeClaim{a, b} {
		va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-" + nc.Name},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nc.Status.NodeName,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-" + nc.Name)}}}
		if err := e.kube.Create(e.ctx, va); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.kube.Delete(context.Background(), va) })
		vas[nc.Name] = va
	}
	metricsBefore := volNodeMetrics(t)
	deleted := time.Now()
	for _, nc := range []karpv1.NodeClaim{a, b} {
		if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "nodeclaim", nc.Name, "--wait=false"); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(60*time.Second, "both NodeClaims drained and awaiting volume detachment", func(ctx context.Context) (bool, error) {
		for _, nc := range []karpv1.NodeClaim{a, b} {
			var got karpv1.NodeClaim
			if err := e.kube.Get(ctx, client.ObjectKeyFromObject(&nc), &got); err != nil {
				return false, err
			}
			c := got.StatusConditions().Get(karpv1.ConditionTypeVolumesDetached)
			if !got.StatusConditions().Get(karpv1.ConditionTypeDrained).IsTrue() || c == nil || !c.IsUnknown() || c.Reason != termination.ReasonAwaitingVolumeDetachment {
				return false, nil
			}
		}
		return true, nil
	})
	if !e.nodeEvent(a.Status.NodeName, termination.ReasonAwaitingVolumeDetachment, "Awaiting deletion of bound volumeattachments (csi-"+a.Name+")") {
		t.Errorf("no Normal %s event on Node %s naming csi-%s", termination.ReasonAwaitingVolumeDetachment, a.Status.NodeName, a.Name)
	}
	// Held: 10 s more, both instances still run.
	time.Sleep(10 * time.Second)
	for _, nc := range []karpv1.NodeClaim{a, b} {
		if !e.instanceLive(nc.Status.ProviderID) {
			t.Fatalf("NodeClaim %s's instance terminated %s after the deletion with its VolumeAttachment still there", nc.Name, time.Since(deleted).Round(time.Second))
		}
	}
	// A's attachment goes: A's instance follows, well before the deadline.
	if err := e.kube.Delete(e.ctx, vas[a.Name]); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "A's instance terminated and NodeClaim gone once its attachment is deleted", func(ctx context.Context) (bool, error) {
		return !e.instanceLive(a.Status.ProviderID) && e.nodeClaimGone(ctx, a.Name), nil
	})
	if since := time.Since(deleted); since >= volumeGrace {
		t.Errorf("A terminated %s after its deletion; want before the terminationGracePeriod (%s)", since.Round(time.Second), volumeGrace)
	}
	if !e.instanceLive(b.Status.ProviderID) {
		t.Fatalf("B's instance terminated before its terminationGracePeriod with its attachment still there")
	}
	// B's never goes: the terminationGracePeriod bounds the wait.
	e.eventually(volumeGrace+60*time.Second, "B's instance terminated once its terminationGracePeriod ran out", func(ctx context.Context) (bool, error) {
		return !e.instanceLive(b.Status.ProviderID) && e.nodeClaimGone(ctx, b.Name), nil
	})
	// The deadline counts from the NodeClaim's deletionTimestamp, whole
	// seconds: at least deleted+grace-1s.
	earliest := deleted.Add(volumeGrace - time.Second)
	id := b.Status.ProviderID[strings.LastIndex(b.Status.ProviderID, "/")+1:]
	for _, in := range e.sim.Instances() {
		if in.ID == id && in.TerminationTime != nil && in.TerminationTime.Before(earliest) {
			t.Errorf("B's instance terminated at %s, before the terminationGracePeriod's end (not before %s)", in.TerminationTime.Format(time.RFC3339), earliest.Format(time.RFC3339))
		}
	}
	// Karpenter's termination families, from the in-process controller:
	// both Nodes drained and terminated, one observation each.
	after := volNodeMetrics(t)
	for name, n := range after {
		if d := n - metricsBefore[name]; d != 2 {
			t.Errorf("%s{nodepool=\"vol\"} moved by %v, want 2 (two Nodes drained and terminated)", name, d)
		}
	}
	scenarioLogf(t, "VolumeAttachment wait: A terminated once its attachment was deleted, B after the %s terminationGracePeriod", volumeGrace)
}

// nodeEvent reports whether an event with reason and message was recorded
// on Node name.
func (e *env) nodeEvent(name, reason, message string) bool {
	var events corev1.EventList
	if err := e.kube.List(e.ctx, &events, client.MatchingFields{"involvedObject.name": name}); err != nil {
		e.t.Logf("listing events of Node %s: %v", name, err)
		return false
	}
	for _, ev := range events.Items {
		if ev.InvolvedObject.Kind == "Node" && ev.Reason == reason && ev.Message == message {
			return true
		}
	}
	return false
}

// volNodeMetrics reads, from the in-process controller's registry, the
// count of each Karpenter node termination family for NodePool vol: the
// counters' values and the summary's and histogram's sample counts (0 when
// absent).
func volNodeMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{
		"karpenter_nodes_drained_total":                0,
		"karpenter_nodes_terminated_total":             0,
		"karpenter_nodes_termination_duration_seconds": 0,
		"karpenter_nodes_lifetime_duration_seconds":    0,
	}
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if _, ok := out[f.GetName()]; !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "nodepool" || l.GetValue() != "vol" {
					continue
				}
				switch {
				case m.Counter != nil:
					out[f.GetName()] = m.Counter.GetValue()
				case m.Summary != nil:
					out[f.GetName()] = float64(m.Summary.GetSampleCount())
				case m.Histogram != nil:
					out[f.GetName()] = float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return out
}
