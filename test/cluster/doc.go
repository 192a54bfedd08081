// Package cluster starts and stops a real local Kubernetes control plane for
// karpx's end-to-end tests and demo: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and the kwok controller (which
// plays kubelet for Nodes annotated kwok.x-k8s.io/node=fake and runs their
// pods), all built from source into the repository's bin/ by
// `make tools` and started by kwokctl with the binary runtime.
//
// Tests call Start (or StartForTest, which skips with a clear message when
// the binaries are missing) and get a kubeconfig, a rest.Config and a Stop.
// Tests that share one cluster take a Snapshot after setting it up and
// Reset it to that baseline after each test (reset.go). A failed test gets
// the components' logs and, with Options.AuditRemovals, who deleted or
// evicted which pod and who wrote which Node taints (FailureLogs,
// Removals): kwokctl gives every component one admin user, so the audit
// log's user agent names the controller's client.
package cluster
