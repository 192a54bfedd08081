package trigger

import (
	"sync"
	"time"
)

// window remembers which keys fired since the last batch window closed, so
// that only the first fire of each key extends the window (see
// Trigger.FireFor).
type window struct {
	mu   sync.Mutex
	keys map[string]struct{}
	// last is when the newest key first fired.
	last time.Time
}

// add records a fire of key at now and reports whether key is new to the
// window.
func (w *window) add(key string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.keys[key]; seen {
		return false
	}
	if w.keys == nil {
		w.keys = map[string]struct{}{}
	}
	w.keys[key] = struct{}{}
	w.last = now
	return true
}

// lastNew returns when the newest key first fired (zero if none).
func (w *window) lastNew() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// close forgets every key: the window has closed and the pass begins.
func (w *window) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.keys)
}

// windowEnd returns when a batch window that opened at opened closes, if
// the newest new key fired at last (zero or before opened: only the fire
// that opened it): idle after the later of the two, but never more than
// maxDuration after opened.
func windowEnd(opened, last time.Time, idle, maxDuration time.Duration) time.Time {
	from := opened
	if last.After(opened) {
		from = last
	}
	end := from.Add(idle)
	if limit := opened.Add(maxDuration); end.After(limit) {
		return limit
	}
	return end
}
