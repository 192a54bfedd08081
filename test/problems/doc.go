// Package problems holds the simulator setup of the five field problems
// (../shared/PROBLEMS.md, P1-P5) in one place, so that karpx's scenarios
// (test/e2e/p*_test.go) and the same scenarios run against the real
// Karpenter AWS provider (test/upstream/problems_test.go) use the same
// ec2sim configuration: token-bucket share, faults, scripted kubelet
// behaviour, image reservations, instance types and workload sizes. It
// holds constants and functions that edit an ec2sim.Config or Simulator;
// each side builds its own cluster, manifests and assertions.
package problems
