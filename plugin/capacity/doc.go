// Package capacity implements `kubectl karpx capacity`: the karpx
// controller's learned-capacity cache, one row per (instance type, AMI)
// with the estimated allocatable and the allocatable observed on a
// registered Node, and the observation's age. It reads the controller's
// /capacity through the API server's service proxy, or --endpoint, as
// `kubectl karpx throttle` reads /throttle. On a cluster without a karpx
// controller (one run by upstream Karpenter) it says so and compares each
// NodeClaim's allocatable with its Node's instead.
package capacity
