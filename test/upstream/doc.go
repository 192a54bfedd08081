// Package upstream runs upstream Karpenter on a test/cluster control plane
// ("upstream mode"), in two forms:
//
//   - The real AWS provider (github.com/aws/karpenter-provider-aws, the
//     version hack/karpenter-aws/go.mod pins, built by `make karpenter-aws`
//     into bin/karpenter-aws) against an ec2sim of its own: StartAWSForTest
//     installs its CRDs from the module (pkg/apis/crds, server-side applied
//     over karpx's) and its Helm chart's RBAC (AWSRBACManifests) and runs
//     it as the chart's ServiceAccount, with AWSEnv's environment pointing
//     every AWS service at ec2sim. Its instances are launched through
//     ec2sim's CreateFleet and join the cluster as ec2sim's kubelet
//     emulation registers them. Its two halves, InstallAWSForTest and
//     StartAWSProcessForTest (for restarts), StartSimForTest (an ec2sim
//     for a cluster) and EC2NodeClassYAML are shared with the head-to-head
//     (test/headtohead), whose karpx and Karpenter AWS sides use them.
//   - The kwok provider (sigs.k8s.io/karpenter/kwok, the version karpx's
//     go.mod requires, built by `make karpenter-kwok` into
//     bin/karpenter-kwok), which makes no cloud call and creates each Node
//     itself: Start, StartForTest. Both sides see the same machines:
//     InstanceTypes renders karpx's catalogue as Karpenter's kwok
//     instance-types file with the zones, capacity types and prices ec2sim
//     serves, and NodeClass gives the KWOKNodeClass a
//     spec.nodeRegistrationDelay equal to ec2sim's launch-to-Node time
//     (BootDelay), so each side's Node appears as long after the launch.
//     The head-to-head benchmark (test/headtohead) runs it.
//
// The package's own tests check the generator against a running ec2sim
// (TestInstanceTypesMatchSimulator), run the AWS provider end to end
// (TestUpstreamKarpenterAWS: pods Running on instances it launched, the
// real kubectl karpx and karpx's webhook on its cluster, scale to zero
// terminating every instance), node repair's scenario with
// NodeRepair=true (TestUpstreamNodeRepair: the same ec2sim node condition
// fault that karpx repairs, repaired by Karpenter after the same
// toleration, docs/node-repair.md), static capacity's with
// StaticCapacity=true (TestUpstreamStaticCapacity: the same static
// NodePool as karpx's TestStaticCapacity reaches the same NodeClaim
// counts, docs/static-capacity.md), EC2 status checks with the default
// gates (TestUpstreamInstanceStatusCheck: the ec2sim status-check fault
// that karpx's instancestatus controller acts on, acted on by Karpenter
// within the same bounds) and the kwok provider's launch and
// restart (TestUpstreamKarpenterKwok). TestUpstreamProblemP1RetryStorm through
// TestUpstreamProblemP5EmptinessConsolidation run the five field problems'
// scenarios on the AWS provider with the ec2sim setup karpx's scenarios
// use (package test/problems) and assert what Karpenter does: the
// problem where it reproduces (P3, P4: the controls of karpx's
// scenarios), its behaviour where it does not (docs/problems.md); they
// are their own tier, `make problems-upstream`, which `make test` skips.
// TestDifferentialConsolidation, TestDifferentialDrift,
// TestDifferentialExpiry and TestDifferentialDrainOrder run one scenario
// on karpx and on the AWS provider at once, each on its own control plane
// and ec2sim, and compare the two sides' decisions normalised to the
// nodes' pods (docs/karpenter-differences.md); they are a tier of their
// own too, `make differential`. The kwok test skips, naming the fix, without bin/karpenter-kwok; the AWS
// provider's tests fail without bin/karpenter-aws, which `make test`
// builds.
package upstream
