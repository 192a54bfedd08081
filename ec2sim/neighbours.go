package ec2sim

import "fmt"

// This file models the other clients of the account. EC2 throttles per
// account and region, so an autoscaler shares every token bucket with the
// account's other callers: CI pipelines, Terraform, consoles, other
// controllers in the same region. ThrottleConfig.Neighbours is the share of
// every bucket those callers use.
//
// The model is deterministic: neighbours hold Neighbours of each bucket's
// size and take Neighbours of its refill, steadily, so the simulator's own
// callers see a bucket of (1-Neighbours)·Size tokens refilled at
// (1-Neighbours)·RefillPerSecond. It is the worst steady case a constant
// neighbour load gives (a neighbour that bursts would leave more in between)
// and it has no randomness, so a scenario that passes once passes every
// time. Neighbours' calls are not counted in Stats: they are not answered,
// only subtracted from the buckets.

// NeighbourShareMax bounds ThrottleConfig.Neighbours: a full share would
// leave nothing to the simulator's callers.
const NeighbourShareMax = 0.99

// validateNeighbours reports a Neighbours share outside [0, NeighbourShareMax].
func (tc ThrottleConfig) validateNeighbours() error {
	if !(tc.Neighbours >= 0 && tc.Neighbours <= NeighbourShareMax) {
		return fmt.Errorf("ec2sim: throttle.neighbours %v is not in [0, %v]", tc.Neighbours, NeighbourShareMax)
	}
	return nil
}

// leftByNeighbours returns the part of b the neighbours leave to the
// simulator's callers. A zero (unlimited) bucket stays unlimited; a bucket
// keeps at least one token so that a lone call can succeed.
func (tc ThrottleConfig) leftByNeighbours(b Bucket) Bucket {
	if tc.Neighbours <= 0 || b.Size <= 0 {
		return b
	}
	left := 1 - tc.Neighbours
	return Bucket{Size: max(1, b.Size*left), RefillPerSecond: b.RefillPerSecond * left}
}
