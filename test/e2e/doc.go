// Package e2e holds karpx's end-to-end tests: a real kube-apiserver, etcd,
// kube-scheduler and kube-controller-manager (test/cluster), the EC2
// simulator on loopback, and the autoscaler in-process talking to both
// through their real clients. The tests skip, naming the fix, when the
// control-plane binaries have not been built (`make tools`).
package e2e
