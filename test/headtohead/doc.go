// Package headtohead runs the same workloads against karpx with its own
// EC2 simulator, the real Karpenter AWS provider (bin/karpenter-aws, `make
// karpenter-aws`) with an ec2sim of its own configured the same way, and
// upstream Karpenter's kwok provider (v1.13.0, `make karpenter-kwok`),
// each on its own local control plane (test/cluster), one after the
// other, and prints one table with a column per side of what a user
// counts: how long pods stay pending, how many nodes and dollars, how fast
// capacity goes away, how much each autoscaler loads the API server, and
// each controller's memory and CPU.
//
// Every figure comes from the control plane alone (pod, Node and NodeClaim
// watches, the API server's and kube-scheduler's /metrics, the API
// server's audit log of the controller's ServiceAccount) and from the
// controller's /proc entry, so
// every side is measured the same way; the two ec2sim sides add the
// decomposition of NodeClaim → Node Ready (CreateFleet issued, instance
// running, Node registered, Node Ready) from their simulator's instance
// records (Decompose) and the burst's EC2 requests by action, CreateFleet
// calls and throttled answers from its counters; every side counts its
// controller log's error lines over the whole run (by message), and
// splits Node Ready → pod Running into karpenter.sh/unregistered gone,
// every blocking taint gone, pod bound and pod Running (SplitBind); the
// ec2sim sides also split each burst pod's pending → Running into the
// steps of the launch that served it, whose means add up to the pods'
// mean (PodPath: the other figures count per NodeClaim or Node), and
// every side reads kube-scheduler's attempts and requeues per burst pod
// from its /metrics (SchedulerCounters). Every
// side gets the same NodePool (only its nodeClassRef differs: the
// EC2NodeClass "default" on both AWS sides, a KWOKNodeClass for the kwok
// provider), the same instance types, zones and prices, and the same
// simulated boot delay (ec2sim's BootDelay; the KWOKNodeClass's
// nodeRegistrationDelay). The AWS sides' simulators share
// one SimConfig, so their throttling buckets are ec2sim's defaults on both.
// Every side's kwok controller plays 32 pods and 32 Nodes at once (flags
// -karpx.h2h-kwok-pod-workers and -karpx.h2h-kwok-node-workers; kwok's
// default is 4 of each), so that a wave of pods bound to newly Ready Nodes,
// or of Nodes registered together, does not queue in the simulator where
// real kubelets, one per Node, would start their pods and post their
// Ready side by side. Every side's
// burst starts 2 minutes after its controller (flag -karpx.h2h-warmup),
// as a burst in a cluster finds a controller that has been running;
// karpx's EC2 budget starts below its share (a slow start, for a
// controller that has just restarted) and reaches it in those 2 minutes.
// Each controller runs with its defaults: karpx keeps to half of EC2's
// buckets (--aws-api-budget-fraction 0.5, problem P1), Karpenter AWS has
// no such bound. Flag -karpx.h2h-karpx-flags (H2H_KARPX_FLAGS) adds flags
// to karpx's, which the table's header then lists.
//
// The workloads, in order on one cluster per side: burst (Karpenter's
// scheduling-benchmark pod mix), consolidation (70% of the pods deleted;
// counted at the end of a fixed window, then again once it has settled:
// no Node change for -karpx.h2h-consolidation-quiet, so that the sides
// are also compared at the end state each reaches, and drift starts
// from it), drift (a NodePool template label changed, with a PodDisruptionBudget),
// scale to zero, and P5 (a WhenEmpty NodePool, preferred anti-affinity
// pods, and a controller restart once the nodes are empty).
//
// `make bench-vs-karpenter-e2e` runs TestHeadToHead at 500 pods,
// `make bench-vs-karpenter-e2e-large` at 2,000; plain `go test` skips it
// unless -karpx.h2h-pods is set.
package headtohead
