package cachetransform

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestPodKeepsWhatKarpxReads: scheduling inputs (labels, annotations,
// owner references, requests, host ports, sidecar restart policy, node
// selector, affinity, tolerations, spread, PVC and ephemeral volumes,
// phase, the PodScheduled condition) survive; managedFields, env,
// commands, probes, security contexts, volume mounts, other volumes, other
// conditions, container statuses, IPs, start time and QoS class go.
func TestPodKeepsWhatKarpxReads(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "app:1", Resources: corev1.ResourceRequirements{Requests: requests},
			Ports:   []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
			Env:     []corev1.EnvVar{{Name: "BIG", Value: "x"}},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}},
			Command: []string{"/app"}, Args: []string{"--flag"},
			VolumeMounts:  []corev1.VolumeMount{{Name: "token", MountPath: "/var/run"}},
			LivenessProbe: &corev1.Probe{}, ReadinessProbe: &corev1.Probe{}, StartupProbe: &corev1.Probe{}, Lifecycle: &corev1.Lifecycle{},
			SecurityContext: &corev1.SecurityContext{},
		}
	}
	sidecar := container("sidecar")
	sidecar.RestartPolicy = &always
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u", Labels: map[string]string{"app": "web"},
			Annotations:     map[string]string{"karpenter.sh/do-not-disrupt": "true"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			NodeName: "n", NodeSelector: map[string]string{"zone": "a"},
			Affinity:                  &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
			Tolerations:               []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone}},
			InitContainers:            []corev1.Container{sidecar},
			Containers:                []corev1.Container{container("app")},
			SecurityContext:           &corev1.PodSecurityContext{},
			ImagePullSecrets:          []corev1.LocalObjectReference{{Name: "registry"}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{}}}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}, InitContainerStatuses: []corev1.ContainerStatus{{Name: "sidecar"}},
			PodIP: "10.0.0.2", PodIPs: []corev1.PodIP{{IP: "10.0.0.2"}}, HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}},
			StartTime: &metav1.Time{}, QOSClass: corev1.PodQOSBurstable},
	}
	want := pod.DeepCopy()
	want.ManagedFields = nil
	for _, c := range []*corev1.Container{&want.Spec.InitContainers[0], &want.Spec.Containers[0]} {
		c.Env, c.EnvFrom, c.Command, c.Args, c.VolumeMounts = nil, nil, nil, nil, nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle, c.SecurityContext = nil, nil, nil, nil, nil
	}
	want.Spec.Volumes = want.Spec.Volumes[:2]
	want.Spec.SecurityContext, want.Spec.ImagePullSecrets = nil, nil
	want.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}

	got, err := Pod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("trimmed pod:\n%+v\nwant:\n%+v", got, want)
	}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "default/web"}
	if got, _ := Pod(tombstone); got != tombstone {
		t.Fatal("a tombstone must pass through unchanged")
	}
}

// TestNodeDropsImagesAndManagedFields: labels, taints, capacity,
// allocatable and conditions stay.
func TestNodeDropsImagesAndManagedFields(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:      []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1 << 20}},
		},
	}
	want := node.DeepCopy()
	want.ManagedFields, want.Status.Images = nil, nil
	got, err := Node(node)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("trimmed node:\n%+v\nwant:\n%+v", got, want)
	}
}

// TestOptions: managedFields go from every type, pods and nodes get their
// own transforms.
func TestOptions(t *testing.T) {
	o := Options()
	if o.DefaultTransform == nil || len(o.ByObject) != 2 {
		t.Fatalf("options %+v", o)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	if got, _ := o.DefaultTransform(cm); got.(*corev1.ConfigMap).ManagedFields != nil {
		t.Fatal("DefaultTransform kept managedFields")
	}
}

// TestPodWithoutClaimsOrScheduling: a pod with only the service-account
// token volume and no PodScheduled condition keeps neither volumes nor
// conditions, and an unschedulable pending pod keeps its PodScheduled
// condition with reason and message (provisioning reads them).
func TestPodWithoutClaimsOrScheduling(t *testing.T) {
	token := corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{token}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	got, _ := Pod(pod)
	if p := got.(*corev1.Pod); p.Spec.Volumes != nil || p.Status.Conditions != nil {
		t.Fatalf("volumes %v, conditions %v: want none", p.Spec.Volumes, p.Status.Conditions)
	}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}
	pending := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}, unschedulable}}}
	got, _ = Pod(pending)
	if c := got.(*corev1.Pod).Status.Conditions; len(c) != 1 || c[0] != unschedulable {
		t.Fatalf("conditions %+v: want only %+v", c, unschedulable)
	}
}
