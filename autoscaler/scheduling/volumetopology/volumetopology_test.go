package volumetopology_test

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpx/karpx/autoscaler/scheduling/volumetopology"
)

func pvc(name, volume, class string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	if class != "" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	return c
}

func pv(name string, terms ...[]corev1.NodeSelectorRequirement) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(terms) > 0 {
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: ns}
	}
	return v
}

func class(name string, mode storagev1.VolumeBindingMode, zones ...string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: ptr.To(mode)}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "topology.ebs.csi.aws.com/zone", Values: zones}}}}
	}
	return sc
}

func zoneIn(key string, zones ...string) []corev1.NodeSelectorRequirement {
	return []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: zones}}
}

func podWithClaims(claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

func TestRequirements(t *testing.T) {
	tests := []struct {
		name    string
		objects []client.Object
		pod     *corev1.Pod
		want    [][]string // zones of each requirement, in order
	}{
		{name: "no volumes", pod: podWithClaims()},
		{name: "bound PV in one zone", pod: podWithClaims("data"),
			objects: []client.Object{pvc("data", "pv-1", ""), pv("pv-1", zoneIn(corev1.LabelTopologyZone, "us-east-1b"))},
			want:    [][]string{{"us-east-1b"}}},
		{name: "bound PV with the EBS CSI key and two ORed terms", pod: podWithClaims("data"),
			objects: []client.Object{pvc("data", "pv-1", ""), pv("pv-1", zoneIn("topology.ebs.csi.aws.com/zone", "us-east-1c"), zoneIn(corev1.LabelTopologyZone, "us-east-1a"))},
			want:    [][]string{{"us-east-1a", "us-east-1c"}}},
		{name: "bound PV without node affinity (e.g. EFS) adds nothing", pod: podWithClaims("data"),
			objects: []client.Object{pvc("data", "pv-1", ""), pv("pv-1")}},
		{name: "unbound WaitForFirstConsumer claim: the class's allowed zones", pod: podWithClaims("data"),
			objects: []client.Object{pvc("data", "", "gp3"), class("gp3", storagev1.VolumeBindingWaitForFirstConsumer, "us-east-1a", "us-east-1b")},
			want:    [][]string{{"us-east-1a", "us-east-1b"}}},
		{name: "unbound Immediate claim adds nothing (its PV will carry the zone)", pod: podWithClaims("data"),
			objects: []client.Object{pvc("data", "", "gp3"), class("gp3", storagev1.VolumeBindingImmediate, "us-east-1a")}},
		{name: "WaitForFirstConsumer class without allowedTopologies adds nothing", pod: podWithClaims("data"),
			objects: []client.Object{pvc("data", "", "gp3"), class("gp3", storagev1.VolumeBindingWaitForFirstConsumer)}},
		{name: "missing claim adds nothing", pod: podWithClaims("data")},
		{name: "two volumes, two requirements", pod: podWithClaims("a", "b"),
			objects: []client.Object{pvc("a", "pv-a", ""), pv("pv-a", zoneIn(corev1.LabelTopologyZone, "us-east-1a")), pvc("b", "", "gp3"), class("gp3", storagev1.VolumeBindingWaitForFirstConsumer, "us-east-1a", "us-east-1c")},
			want:    [][]string{{"us-east-1a"}, {"us-east-1a", "us-east-1c"}}},
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.objects...).Build()
			got, err := volumetopology.Requirements(context.Background(), c, tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			var zones [][]string
			for _, r := range got {
				if r.Key != corev1.LabelTopologyZone || r.Operator != corev1.NodeSelectorOpIn {
					t.Errorf("requirement %v, want topology.kubernetes.io/zone In", r)
				}
				zones = append(zones, r.Values)
			}
			if !reflect.DeepEqual(zones, tt.want) {
				t.Errorf("zones %v, want %v", zones, tt.want)
			}
		})
	}
}
