// Package garbagecollection reconciles the cloud with the cluster, both
// ways, and only from complete, successful answers:
//
//   - an instance karpx launched (tagged for this cluster) that no NodeClaim
//     claims, seen so in successive complete List answers spanning at least
//     the grace period, is terminated (a leak after a crash mid-launch);
//   - a launched NodeClaim whose instance the cloud reports terminated or
//     gone (a successful Get answering NotFound) for longer than the grace
//     period is deleted, so its pods are provisioned for elsewhere.
//
// A failed, throttled or partial cloud answer changes nothing: problem P1
// says a cloud error must never delete a healthy Node or NodeClaim.
package garbagecollection
