package budget

import "github.com/karpx/karpx/autoscaler/cloudprovider"

// WithoutBuckets returns o for a Limiter that takes no tokens but counts
// every call: the control of a test that shows what the budget prevents.
func WithoutBuckets(o Options) Options {
	o.passThrough = true
	return o
}

// Queued returns the number of calls of action waiting for a token of its
// filtered bucket, at every priority: a test on a fake clock waits until
// each call of a burst is answered or queued before it moves the time.
func (l *Limiter) Queued(action string) int {
	b := l.buckets[bucketKey{action: action}]
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queuedAtOrAbove(cloudprovider.PrioritySpeculative)
}

// CallInstances is callInstances, for TestCallInstances.
var CallInstances = callInstances
