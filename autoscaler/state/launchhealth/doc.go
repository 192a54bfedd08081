// Package launchhealth remembers, per (NodePool, EC2NodeClass), launches
// that keep failing for the same cause — EC2 rejecting CreateFleet, or
// instances whose Nodes never register — and pauses provisioning for that
// pair with an exponential, jittered backoff (problem P1: a relaunch loop
// must slow down and stop instead of exhausting the EC2 API budget).
//
// The provisioner asks Paused before planning NodeClaims for a NodePool;
// the NodeClaim lifecycle controller reports Failure and Success; the
// NodePool status controller shows the state as the NodeRegistrationHealthy
// condition. A change of the NodePool's or the EC2NodeClass's generation
// (the user fixed the spec) ends a pause at once.
package launchhealth
