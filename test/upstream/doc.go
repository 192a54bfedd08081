// Package upstream runs upstream Karpenter's kwok cloud provider
// (sigs.k8s.io/karpenter/kwok, the version karpx's go.mod requires, built by
// `make karpenter-kwok` into bin/karpenter-kwok) on a test/cluster control
// plane: the real upstream provisioning, disruption, termination and state
// controllers, with Nodes that Karpenter creates itself and kwok keeps Ready.
// It is the starter for "upstream mode" tests (kubectl karpx and the webhook
// on a cluster that Karpenter runs) and for the head-to-head benchmark
// against karpx and ec2sim.
//
// A test starts a cluster (cluster.StartForTest), then calls StartForTest
// (or InstallCRDs, WriteInstanceTypes and Start), and creates its NodePools
// with ApplyNodePool, which points their nodeClassRef at a KWOKNodeClass.
//
// Both sides see the same machines: InstanceTypes renders karpx's catalogue
// as Karpenter's kwok instance-types file with the zones, capacity types and
// prices ec2sim serves, and NodeClass gives the KWOKNodeClass a
// spec.nodeRegistrationDelay equal to ec2sim's launch-to-Node time
// (BootDelay), so each side's Node appears as long after the launch.
//
// The package's own tests check the generator against a running ec2sim
// (TestInstanceTypesMatchSimulator) and run upstream mode end to end
// (TestUpstreamKarpenterKwok: the real kubectl karpx and karpx's webhook on
// a cluster Karpenter runs); the latter skips, naming the fix, without
// bin/karpenter-kwok.
package upstream
