package volumetopology

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// zoneKeys are the label keys that name a node's zone in PV node affinity
// and StorageClass allowedTopologies, all read as
// topology.kubernetes.io/zone. Sources: Kubernetes well-known labels
// (failure-domain.beta.kubernetes.io/zone is the deprecated form) and the
// AWS EBS CSI driver, whose volumes carry topology.ebs.csi.aws.com/zone.
var zoneKeys = map[string]bool{
	corev1.LabelTopologyZone:          true,
	corev1.LabelFailureDomainBetaZone: true,
	"topology.ebs.csi.aws.com/zone":   true,
}

// Requirements returns the zone requirements (topology.kubernetes.io/zone
// In [...], one per volume that constrains the zone; ANDed) of pod's
// persistentVolumeClaim and generic ephemeral volumes. Several terms of one
// volume (ORed) become one In with the union of their zones; keys other
// than zone keys (region, CSI-specific keys) are left out, as every node of
// a cluster is in one region. A claim or PersistentVolume that does not
// exist yet adds nothing (the pod waits for it anyway). It returns an error
// when reading a claim, volume or StorageClass fails for another reason.
func Requirements(ctx context.Context, c client.Reader, pod *corev1.Pod) ([]corev1.NodeSelectorRequirement, error) {
	var out []corev1.NodeSelectorRequirement
	for _, v := range pod.Spec.Volumes {
		var claimName string
		switch {
		case v.PersistentVolumeClaim != nil:
			claimName = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claimName = pod.Name + "-" + v.Name // the name Kubernetes gives a generic ephemeral volume's claim
		default:
			continue
		}
		zones, err := claimZones(ctx, c, pod.Namespace, claimName)
		if err != nil {
			return nil, fmt.Errorf("volume %q of pod %s/%s: %w", v.Name, pod.Namespace, pod.Name, err)
		}
		if zones != nil {
			out = append(out, corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones})
		}
	}
	return out, nil
}

// claimZones returns the zones a claim's volume allows (nil: any).
func claimZones(ctx context.Context, c client.Reader, namespace, name string) ([]string, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pvc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName != "" {
		var pv corev1.PersistentVolume
		if err := c.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, &pv); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			return nil, nil
		}
		var terms [][]corev1.NodeSelectorRequirement
		for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
			terms = append(terms, t.MatchExpressions)
		}
		return unionZones(terms), nil
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil, nil
	}
	var sc storagev1.StorageClass
	if err := c.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, &sc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil, nil
	}
	var terms [][]corev1.NodeSelectorRequirement
	for _, t := range sc.AllowedTopologies {
		var exprs []corev1.NodeSelectorRequirement
		for _, e := range t.MatchLabelExpressions {
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
		}
		terms = append(terms, exprs)
	}
	return unionZones(terms), nil
}

// unionZones returns the zones allowed by ORed terms of ANDed expressions:
// the union over terms of the zones each allows (In on a zone key, several
// In on zone keys intersected). A term without a zone In allows any zone,
// and so does the whole list (nil).
func unionZones(terms [][]corev1.NodeSelectorRequirement) []string {
	union := map[string]struct{}{}
	for _, t := range terms {
		var zones map[string]struct{}
		for _, e := range t {
			if !zoneKeys[e.Key] || e.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			next := map[string]struct{}{}
			for _, z := range e.Values {
				if _, ok := zones[z]; zones == nil || ok {
					next[z] = struct{}{}
				}
			}
			zones = next
		}
		if zones == nil {
			return nil
		}
		for z := range zones {
			union[z] = struct{}{}
		}
	}
	if len(terms) == 0 {
		return nil
	}
	out := make([]string, 0, len(union))
	for z := range union {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}
