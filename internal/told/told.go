// Package told tells a failure that repeats once, and once more when it
// ends: a disk full for an hour, and every write refused meanwhile, is
// two lines in the log, not thousands.
package told

import (
	"sync"
	"sync/atomic"
	"time"
)

// Once is the state of one kind of failure; its zero value is fine
// (nothing failing).
type Once struct {
	failing atomic.Bool // End's fast path: nothing failing
	mu      sync.Mutex
	since   time.Time
	n       int
}

// Fail counts a failure and reports whether it is the first since the
// last End: the one to tell (the rest are for a debug log).
func (o *Once) Fail() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	if o.failing.Load() {
		return false
	}
	o.failing.Store(true)
	o.since, o.n = time.Now(), 1
	return true
}

// End ends a failure told by Fail: ok reports whether there was one (to
// tell that it ended), n how many times it failed, since when.
func (o *Once) End() (ok bool, n int, since time.Time) {
	if !o.failing.Load() {
		return false, 0, time.Time{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.failing.Load() {
		return false, 0, time.Time{}
	}
	o.failing.Store(false)
	return true, o.n, o.since
}

// Failing reports whether a failure told by Fail has not ended yet.
func (o *Once) Failing() bool { return o.failing.Load() }
