// Package operator assembles the karpx autoscaler: it reads Options from
// flags and the environment, builds the controller-runtime manager (leader
// election, health and readiness probes, Prometheus metrics), the AWS
// CloudProvider, and registers the provisioning and NodeClaim lifecycle
// controllers. cmd/karpx-controller is a thin main around Run; tests build
// the same operator in-process with New.
package operator
