package batcher

import "testing"

// closed reports whether c is closed, without blocking.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A call that starts while another goroutine waits for none to be in
// flight extends the wait (sync.WaitGroup forbids that order).
func TestInFlightStartWhileWaiting(t *testing.T) {
	var f inFlight
	if !closed(f.idle()) {
		t.Fatal("idle not closed with no call in flight")
	}
	f.start()
	wait := f.idle()
	f.start() // a second call while wait is held
	f.done()
	if closed(wait) {
		t.Fatal("idle closed with one call still in flight")
	}
	f.done()
	if !closed(wait) {
		t.Fatal("idle still open after the last call")
	}
	f.start()
	if closed(f.idle()) {
		t.Fatal("a new call after idle did not open a new wait")
	}
	f.done()
	if !closed(f.idle()) {
		t.Fatal("idle not closed after the new call")
	}
}
