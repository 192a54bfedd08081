package cachetransform

import (
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options returns the cache options of the controller's manager:
// managedFields stripped from every object, and Pods and Nodes trimmed by
// Pod and Node.
func Options() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: Pod},
			&corev1.Node{}: {Transform: Node},
		},
	}
}

// Pod trims a *corev1.Pod in place (see the package documentation) and
// returns it; other objects (such as cache.DeletedFinalStateUnknown) are
// returned unchanged. It never returns an error.
func Pod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			trimContainer(&cs[i])
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].EphemeralContainerCommon
		c.Env, c.EnvFrom, c.Command, c.Args, c.VolumeMounts = nil, nil, nil, nil, nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle, c.SecurityContext = nil, nil, nil, nil, nil
	}
	pod.Spec.Volumes = claimVolumes(pod.Spec.Volumes)
	pod.Spec.SecurityContext, pod.Spec.DNSConfig, pod.Spec.HostAliases, pod.Spec.ImagePullSecrets = nil, nil, nil, nil
	pod.Status.Conditions = scheduledCondition(pod.Status.Conditions)
	pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses = nil, nil, nil
	pod.Status.PodIP, pod.Status.PodIPs, pod.Status.HostIP, pod.Status.HostIPs = "", nil, "", nil
	pod.Status.StartTime, pod.Status.QOSClass = nil, ""
	return pod, nil
}

// claimVolumes returns the volumes of vs with a persistentVolumeClaim or
// ephemeral source (volume topology reads them), in a new slice, or nil
// when there are none: the service-account token volume every pod has
// goes, and with it the slice the API's answer was decoded into.
func claimVolumes(vs []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vs {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out = append(out, v)
		}
	}
	return out
}

// scheduledCondition returns, in a new slice, the PodScheduled condition of
// conds (Unschedulable marks a pod to provision for) and a True PodReady
// condition cut to its type, status and lastTransitionTime
// (karpenter_pods_startup_duration_seconds is measured to it, as Karpenter
// does), or nil when there is neither. A running pod's other conditions
// were a quarter of a cached pod's memory.
func scheduledCondition(conds []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range conds {
		switch {
		case c.Type == corev1.PodScheduled:
			out = append(out, c)
		case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
}

// trimContainer drops what karpx does not read from c; name, image,
// resources, ports (host ports) and restartPolicy (sidecar init
// containers) stay.
func trimContainer(c *corev1.Container) {
	c.Env, c.EnvFrom, c.Command, c.Args, c.VolumeMounts, c.VolumeDevices = nil, nil, nil, nil, nil, nil
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle, c.SecurityContext = nil, nil, nil, nil, nil
}

// Node trims a *corev1.Node in place (managedFields, status.images) and
// returns it; other objects are returned unchanged. It never returns an
// error.
func Node(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	node.Status.Images = nil
	return node, nil
}

var _ toolscache.TransformFunc = Pod
var _ toolscache.TransformFunc = Node
