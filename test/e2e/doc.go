// Package e2e holds karpx's end-to-end tests: a real kube-apiserver, etcd,
// kube-scheduler and kube-controller-manager (test/cluster), the EC2
// simulator on loopback, and the autoscaler in-process talking to both
// through their real clients. The tests skip, naming the fix, when the
// control-plane binaries have not been built (`make tools`).
//
// The tests share one control plane per package run, reset to its
// baseline after each test (shared_test.go); each test has its own
// simulator and autoscaler. Tests that restart, audit or fill the control
// plane get their own (envOptions.ownControlPlane, envOptions.audit,
// ownControlPlaneTests).
package e2e
