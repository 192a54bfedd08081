// Package volumetopology reads the zone constraints a pod's volumes put on
// the node it runs on, for scheduling.Input.VolumeRequirements: the zones
// in the nodeAffinity of the PersistentVolumes its claims are bound to,
// and the zones in the allowedTopologies of the StorageClass of each
// unbound claim whose volumeBindingMode is WaitForFirstConsumer (the volume
// is created in the zone of the node the pod lands on, so that node must
// be in an allowed zone). It is the reader side of scheduling's volume
// topology, kept apart so that scheduling.Solve stays free of API calls.
//
//	reqs, err := volumetopology.Requirements(ctx, kubeClient, pod)
//	in.VolumeRequirements[pod.UID] = reqs
package volumetopology
