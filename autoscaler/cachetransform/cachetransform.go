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
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim == nil && v.Ephemeral == nil {
			v.VolumeSource = corev1.VolumeSource{}
		}
	}
	pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses = nil, nil, nil
	return pod, nil
}

// trimContainer drops what karpx does not read from c; name, image,
// resources, ports (host ports) and restartPolicy (sidecar init
// containers) stay.
func trimContainer(c *corev1.Container) {
	c.Env, c.EnvFrom, c.Command, c.Args, c.VolumeMounts, c.VolumeDevices = nil, nil, nil, nil, nil, nil
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
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
