// Package pods says which pods a node must give up when it goes away:
// Reschedulable (emptiness and consolidation count these), Evictable (the
// drain removes these), ToleratesDisrupted (evicted last) and
// AwaitingScheduler (a pod kube-scheduler has not judged yet). It depends on
// nothing but the Kubernetes API types, so the kubectl plugin shares the
// same definitions as the controller.
package pods
