// Package launchlatency measures provisioning latency: the time from the
// provisioner first seeing a pod pending (unschedulable) to the CreateFleet
// call launching the NodeClaim the pod was planned onto being issued. It
// includes the provisioning batch window (--batch-idle-duration,
// --batch-max-duration), the scheduling pass, the NodeClaim's creation and
// the lifecycle controller's reconcile, and the EC2 batcher's window; it
// excludes EC2's answer and everything after.
//
// The provisioner calls Tracker.Seen and Tracker.Planned; the NodeClaim
// lifecycle controller wraps the context of its launch with
// Tracker.ForLaunch; the EC2 client calls Issued when it hands CreateFleet
// to the AWS SDK (the EC2 batcher merges the launches of the calls it
// merges, with Merge). Each pod is observed once, on the first CreateFleet
// of its NodeClaim, into the histogram MetricPodToLaunch.
package launchlatency
