// Package cachetransform trims the objects the controller's informers keep
// in memory to what karpx reads, so that the controller's memory grows
// slowly with the cluster (issue 12's goal: at most 300 MiB with 2,000
// nodes and 20,000 pods).
//
// Every object loses metadata.managedFields (karpx never reads them and
// writes with merge patches and updates that leave them to the API
// server). Pods also lose what no karpx controller reads: containers'
// environment, commands, arguments, probes, lifecycle hooks, security
// contexts and volume mounts; volumes other than persistentVolumeClaim and
// ephemeral ones (kept: volume topology reads them); the pod's security
// context, DNS config, host aliases and image pull secrets; every status
// condition but PodScheduled; container statuses, IPs, start time and QoS
// class.
// Nodes lose status.images. karpx never updates a Pod, and patches Nodes
// with merge patches computed from two trimmed copies, so nothing trimmed
// is ever written back.
package cachetransform
