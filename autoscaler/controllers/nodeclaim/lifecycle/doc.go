// Package lifecycle moves each NodeClaim through Karpenter's phases:
//
//	Launched    – the CloudProvider created the instance; providerID, image,
//	              capacity and the instance's labels are recorded.
//	Registered  – a Node with that providerID joined; karpx syncs the
//	              NodeClaim's labels and taints onto it, removes the
//	              karpenter.sh/unregistered taint, owns the Node and adds
//	              the karpenter.sh/termination finalizer to it, in one
//	              JSON patch that tests only the taints it replaces, so
//	              the kubelet's status writes do not make it fail.
//	Initialized – the Node is Ready, its startup taints and the known
//	              ephemeral taints are gone, and every requested extended
//	              resource is allocatable. Until then the condition says
//	              why not; a new reason is written only once 2 s have
//	              passed since the registration
//	              (InitializationReasonSettle).
//
// A NodeClaim whose Node has not registered within the registration TTL is
// deleted, and so is a registered NodeClaim whose Node is gone. Deletion (the
// karpenter.sh/termination finalizer) deletes the Node, which package
// termination drains through the Eviction API and whose instance it
// terminates (recording InstanceTerminating=True on the NodeClaim); the
// NodeClaim is released once the Node is gone and, for a NodeClaim without
// that condition (it never had a Node), once its own termination request
// is confirmed shutting-down or terminated: each instance is terminated
// once. A registered NodeClaim whose condition the cache does not show yet
// is read once from the API server first (so the controller's RBAC grants
// get on nodeclaims). TTLs, backoffs and the NotReady threshold run on
// Options.Clock. A status that would not change is not written, and a
// reconcile that reads a NodeClaim older than a phase the controller itself
// recorded (its informer cache lags its own write) waits for the cache
// instead of writing that phase again, for at most 10 s. Launch errors become Warning events on the
// NodeClaim and a backoff, never a hot loop; only ICE (insufficient
// capacity) deletes the NodeClaim at once, so the provisioner re-plans with
// other offerings.
package lifecycle
