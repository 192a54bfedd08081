// Package provisioning turns pending pods into NodeClaims.
//
// A pod controller watches pods that kube-scheduler marked Unschedulable and
// triggers the Provisioner. The Provisioner batches triggers (package
// trigger: an idle window that only an object's first trigger in the window
// restarts, and a maximum window, as Karpenter's BATCH_IDLE_DURATION and
// BATCH_MAX_DURATION), then reads the whole current state — pending pods,
// NodePools with their instance types, every live Node with its pods and
// free capacity, and every NodeClaim still on its way (launching,
// registering) — through autoscaler/state/clusterstate, and asks
// autoscaler/scheduling where the pods go. Pods that fit on existing or
// in-flight nodes are not provisioned for again; the rest become new
// NodeClaims, created up to 128 at once, those that carry the most pods
// first. Each pass that found pending pods logs one "provisioning pass"
// line (pods, NodeClaims, the read, solve and create seconds).
// The pass is level-triggered: between passes it keeps only the
// nominations (a pod waits for the in-flight NodeClaim it was planned on,
// its room reserved there, until that NodeClaim initialises, times out or
// its Node was taken by other pods) and waits until its own creations are
// visible in the informer cache; a periodic resync re-runs it so that no
// lost event can wedge it.
package provisioning
