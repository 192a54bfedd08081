// Package operator assembles the karpx autoscaler: it reads Options from
// flags and the environment, builds the controller-runtime manager (leader
// election, health and readiness probes, Prometheus metrics (HTTPS behind
// controller-runtime's TokenReview/SubjectAccessReview filter by default),
// the plain-HTTP status endpoints kubectl karpx reads on a port of their
// own (status.go), informers
// trimmed by state/cachetransform and indexed by clusterstate.IndexFields),
// the cloud provider (the AWS one, autoscaler/aws/cloudprovider, with its
// EC2 client, budget, batcher, caches and hydration registry: aws.go), and
// registers the controllers in New, one small function each
// (register.go, in this order):
//
//   - cloud-neutral (autoscaler/controllers): provisioning (behind the
//     hydration gate: it starts once the instance types and offerings are
//     loaded), NodeClaim lifecycle, Node termination, disruption with its
//     PodEvents controller;
//   - AWS (autoscaler/aws/controllers): interruption, when
//     --interruption-queue names a queue, and instancestatus (EC2 status
//     checks, always on EC2; its report at /instancestatus on the status
//     address);
//   - cloud-neutral: garbage collection and NodePool status;
//   - AWS: the EC2NodeClass capacity, termination and status controllers,
//     each when the cloud provider implements the interface it needs;
//   - the /healthz and /readyz checks.
//
// Before it indexes NodeClaims, New waits up to KindsTimeout (2 minutes)
// for the API server to serve NodeClaim and NodePool (kinds.go): an API
// server that has just restarted serves its CRDs a moment after it
// answers, and controller-runtime's IndexField, unlike its watches, fails
// at once on a kind not served yet.
//
// When the manager stops, the leader gives the batcher's deferred
// per-NodeClaim tags still in flight up to 10 s to land, then cancels
// them (stopHook, batcher.API.Stop).
//
// Every protection against the field problems of docs/reliability.md
// (caches, budget, batching, launch health, nomination and the grace
// window, hydration ordering, capacity learning, periodic disruption) is
// always on: no option or flag turns one off. The controls that show the
// problems run the real Karpenter AWS provider (test/upstream).
//
// cmd/karpx-controller is a thin main around Run; tests build the same
// operator in-process with New.
package operator
