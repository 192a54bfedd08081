package termination

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// VolumeAttachmentNodeNameField indexes VolumeAttachments by spec.nodeName
// in the manager's cache (registered by NodeController.Register), as
// Karpenter's GetVolumeAttachments lists them (pkg/utils/node/
// node.go@v1.14.0).
const VolumeAttachmentNodeNameField = "spec.nodeName"

// Karpenter's names for the VolumesDetached condition's reasons and the
// event of a node waiting for its volumes
// (pkg/controllers/node/termination/controller.go and
// terminator/events/events.go@v1.14.0).
const (
	// ReasonAwaitingVolumeDetachment is the reason of VolumesDetached=
	// Unknown while VolumeAttachments remain, and of the Node's Normal
	// event.
	ReasonAwaitingVolumeDetachment = "AwaitingVolumeDetachment"
	// ReasonTerminationGracePeriodElapsed is the reason of
	// VolumesDetached=False: the NodeClaim's terminationGracePeriod ran out
	// with VolumeAttachments remaining, and the instance is terminated
	// without waiting further.
	ReasonTerminationGracePeriodElapsed = "TerminationGracePeriodElapsed"
)

// eventAttachmentNames is how many VolumeAttachment names the
// AwaitingVolumeDetachment event names before "and N other(s)", as
// Karpenter's pretty.Slice(names, 5) does.
const eventAttachmentNames = 5

// indexVolumeAttachments registers VolumeAttachmentNodeNameField with
// indexer. It returns the indexer's error (a duplicate registration, or a
// cache already started).
func indexVolumeAttachments(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &storagev1.VolumeAttachment{}, VolumeAttachmentNodeNameField, func(o client.Object) []string {
		if n := o.(*storagev1.VolumeAttachment).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	})
}

// awaitVolumes is the step between the drain and the instance's
// termination, as Karpenter's awaitVolumeDetachment
// (pkg/controllers/node/termination/controller.go@v1.14.0): the
// VolumeAttachments of node (pendingVolumeAttachments) must be gone first,
// so the drained pods' volumes can attach elsewhere without the
// multi-attach errors a terminated instance's stale attachments cause. It
// returns true while the caller must wait; it then records
// VolumesDetached=Unknown (reason AwaitingVolumeDetachment) on nc and a
// Normal AwaitingVolumeDetachment event on node naming the attachments.
// Once deadline (the terminationGracePeriod's end; nil: none) has passed it
// stops waiting and records VolumesDetached=False (reason
// TerminationGracePeriodElapsed); with no attachment left,
// VolumesDetached=True. The condition is set on nc in memory (see
// writeConditions); nc may be nil (no NodeClaim: nothing recorded). It
// returns the API server's error when the attachments, pods or claims
// cannot be read.
func (c *NodeController) awaitVolumes(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, deadline *time.Time) (bool, error) {
	pending, err := c.pendingVolumeAttachments(ctx, node)
	if err != nil {
		return false, err
	}
	cond := func(set func(*karpv1.NodeClaim)) {
		if nc != nil {
			set(nc)
		}
	}
	switch {
	case len(pending) == 0:
		cond(func(nc *karpv1.NodeClaim) { nc.StatusConditions().SetTrue(karpv1.ConditionTypeVolumesDetached) })
		return false, nil
	case deadline == nil || !c.clock.Now().After(*deadline):
		c.recorder.Eventf(node, corev1.EventTypeNormal, ReasonAwaitingVolumeDetachment,
			"Awaiting deletion of bound volumeattachments (%s)", attachmentNames(pending))
		cond(func(nc *karpv1.NodeClaim) {
			nc.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeVolumesDetached, ReasonAwaitingVolumeDetachment, ReasonAwaitingVolumeDetachment)
		})
		return true, nil
	default:
		cond(func(nc *karpv1.NodeClaim) {
			nc.StatusConditions().SetFalse(karpv1.ConditionTypeVolumesDetached, ReasonTerminationGracePeriodElapsed, ReasonTerminationGracePeriodElapsed)
		})
		return false, nil
	}
}

// pendingVolumeAttachments returns the VolumeAttachments on node that its
// termination waits for, as Karpenter's filterVolumeAttachments
// (controller.go@v1.14.0): those of a PersistentVolume, except the volumes
// of pods the drain leaves on the node (leftByDrain: pods tolerating the
// karpenter.sh/disrupted taint, mirror pods, pods stuck terminating),
// which stay attached until the instance goes. A pod's volume is matched
// Pod → PersistentVolumeClaim (a persistentVolumeClaim volume's claim, or
// an ephemeral volume's generated claim POD-VOLUME) → its bound
// PersistentVolume ← VolumeAttachment; a claim that no longer exists is
// skipped. The answer is sorted by name.
func (c *NodeController) pendingVolumeAttachments(ctx context.Context, node *corev1.Node) ([]storagev1.VolumeAttachment, error) {
	var vas storagev1.VolumeAttachmentList
	if err := c.kube.List(ctx, &vas, client.MatchingFields{VolumeAttachmentNodeNameField: node.Name}); err != nil {
		return nil, fmt.Errorf("listing VolumeAttachments of node %s: %w", node.Name, err)
	}
	if len(vas.Items) == 0 {
		return nil, nil
	}
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{clusterstate.PodNodeNameField: node.Name}); err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	now := c.clock.Now()
	left := sets.New[string]()
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !leftByDrain(pod, now) {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			name := claimName(pod, v)
			if name == "" {
				continue
			}
			var pvc corev1.PersistentVolumeClaim
			if err := c.kube.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &pvc); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("getting PersistentVolumeClaim %s/%s of pod %s: %w", pod.Namespace, name, pod.Name, err)
			}
			left.Insert(pvc.Spec.VolumeName)
		}
	}
	var pending []storagev1.VolumeAttachment
	for _, va := range vas.Items {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && !left.Has(*pv) {
			pending = append(pending, va)
		}
	}
	slices.SortFunc(pending, func(a, b storagev1.VolumeAttachment) int { return strings.Compare(a.Name, b.Name) })
	return pending, nil
}

// claimName is the PersistentVolumeClaim behind pod's volume v: a
// persistentVolumeClaim volume's claimName, or an ephemeral volume's
// generated claim, "<pod>-<volume>" (Kubernetes docs, "Ephemeral Volumes:
// PersistentVolumeClaim naming"); "" for any other volume.
func claimName(pod *corev1.Pod, v corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name
	}
	return ""
}

// attachmentNames lists the first eventAttachmentNames names of vas,
// comma-separated, then "and N other(s)".
func attachmentNames(vas []storagev1.VolumeAttachment) string {
	names := make([]string, 0, min(len(vas), eventAttachmentNames))
	for _, va := range vas[:min(len(vas), eventAttachmentNames)] {
		names = append(names, va.Name)
	}
	s := strings.Join(names, ", ")
	if n := len(vas) - len(names); n > 0 {
		s += fmt.Sprintf(" and %d other(s)", n)
	}
	return s
}
