package budget

// Queued returns the number of calls of action waiting for a token of its
// filtered bucket, at every priority: a test on a fake clock waits until
// each call of a burst is answered or queued before it moves the time.
func (l *Limiter) Queued(action string) int {
	b := l.buckets[bucketKey{action: action}]
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queuedAtOrAbove(Speculative)
}
