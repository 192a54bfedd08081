// Package termination drains and terminates nodes: every way a node leaves
// the cluster (a NodeClaim deleted by the user or by disruption, a Node
// deleted with kubectl, a NodePool deleted and its NodeClaims collected)
// ends in the same path.
//
// A NodeClaim's Node carries the karpenter.sh/termination finalizer from
// registration on. When the Node is deleted, the NodeController here:
//
//  1. deletes the Node's NodeClaim too, so both are accounted as leaving;
//  2. taints the Node karpenter.sh/disrupted:NoSchedule;
//  3. drains it through the Eviction API, which enforces
//     PodDisruptionBudgets: DaemonSet, mirror and finished pods are left,
//     pods that tolerate the disrupted taint go last, and once the
//     NodeClaim's terminationGracePeriod has passed (or would pass during a
//     pod's own grace period) the remaining pods are deleted instead;
//  4. waits until the Node's VolumeAttachments are deleted (those of the
//     pods it drained; see pendingVolumeAttachments), recording the
//     NodeClaim's VolumesDetached condition and the Node's
//     AwaitingVolumeDetachment event as Karpenter v1.14 does, and stops
//     waiting once the terminationGracePeriod has run out;
//  5. terminates the instance with one CloudProvider.Delete (on AWS one
//     DescribeInstances and one TerminateInstances through the batcher,
//     whose answer reports the instance shutting-down) and records
//     InstanceTerminating=True on the NodeClaim, as Karpenter's node
//     termination controller does;
//  6. removes the finalizer.
//
// Steps 3 to 5 change the NodeClaim's conditions (Drained,
// VolumesDetached, InstanceTerminating) in memory and each reconcile
// writes them in one status patch, as Karpenter's termination controller
// does: an empty Node's termination is one write, not one per condition.
//
// The NodeClaim's own finalizer (package lifecycle) deletes the Node
// through this path and waits for it before releasing the NodeClaim; it
// terminates the instance itself only when InstanceTerminating is not
// True (the NodeClaim never had a Node, or its Node was removed around this
// path), so an instance is terminated once per deletion. Every
// step reads its state from the API server and EC2, so a controller that
// crashes at any point resumes where it stopped.
package termination
