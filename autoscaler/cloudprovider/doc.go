// Package cloudprovider is the seam between karpx's cloud-neutral code and
// the cloud: the CloudProvider interface, the InstanceType and Offering
// values the scheduler packs pods onto, the typed errors controllers branch
// on, TerminateInstance (what "the instance is gone" means through the
// interface), the priority a caller gives its cloud calls through the
// context (WithPriority, PriorityFrom: the AWS request budget serves
// launches and terminations before speculative reads), and the
// interruption annotations a cloud's interruption
// handling writes on NodeClaims for the disruption controller and `kubectl
// karpx status` to read, and the repair policies (RepairPolicy,
// RepairPolicyProvider) node repair acts on. It holds cloud-neutral types only and imports no
// other karpx package.
//
// The cloud-neutral controllers (autoscaler/controllers: provisioning,
// NodeClaim lifecycle, termination, disruption, garbage collection) call a
// CloudProvider and never an SDK; the AWS implementation lives in
// autoscaler/aws/cloudprovider, with every EC2 call (and its throttling,
// batching and caching) below it under autoscaler/aws.
package cloudprovider
