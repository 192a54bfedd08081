// Package headtohead runs the same workloads against upstream Karpenter
// (v1.13.0's kwok cloud provider, built by `make karpenter-kwok`) and
// against karpx with the EC2 simulator, each on its own local control plane
// (test/cluster), one after the other, and prints one table of what a user
// counts: how long pods stay pending, how many nodes and dollars, how fast
// capacity goes away, how much each autoscaler loads the API server, and
// each controller's memory and CPU.
//
// Every figure comes from the API server alone (pod, Node and NodeClaim
// watches, the API server's /metrics and its audit log of the
// controller's ServiceAccount) and from the controller's /proc entry, so
// both sides are measured the same way. Both sides get the same NodePool
// (only its nodeClassRef differs: EC2NodeClass for karpx, KWOKNodeClass for
// Karpenter), the same instance types and prices, and the same simulated
// boot delay (ec2sim's BootDelay; the KWOKNodeClass's
// nodeRegistrationDelay).
//
// The workloads, in order on one cluster per side: burst (Karpenter's
// scheduling-benchmark pod mix), consolidation (70% of the pods deleted),
// drift (a NodePool template label changed, with a PodDisruptionBudget),
// scale to zero, and P5 (a WhenEmpty NodePool, preferred anti-affinity
// pods, and a controller restart once the nodes are empty).
//
// `make bench-vs-karpenter-e2e` runs TestHeadToHead; plain `go test` skips
// it unless -karpx.h2h-pods is set.
package headtohead
