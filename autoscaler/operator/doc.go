// Package operator assembles the karpx autoscaler: it reads Options from
// flags and the environment, builds the controller-runtime manager (leader
// election, health and readiness probes, Prometheus metrics, informers
// trimmed by state/cachetransform and indexed by clusterstate.IndexFields),
// the cloud provider (the AWS one, autoscaler/aws/cloudprovider, with its
// EC2 client, budget, batcher and hydration registry: aws.go), and
// registers every controller in New:
//
//   - cloud-neutral (autoscaler/controllers): provisioning, NodeClaim
//     lifecycle, Node termination, disruption with its PodEvents
//     controller, garbage collection and NodePool status;
//   - AWS (autoscaler/aws/controllers): interruption, when
//     --interruption-queue names a queue, and the EC2NodeClass capacity,
//     termination and status controllers, each when the cloud provider
//     implements the interface it needs.
//
// Provisioning starts only once the cloud data it needs is loaded
// (hydration.After), unless --hydration-ordering=false.
// cmd/karpx-controller is a thin main around Run; tests build the same
// operator in-process with New.
package operator
