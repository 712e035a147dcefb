package e2e

import (
	"strings"
	"sync"
	"time"
)

// lockedWriter collects what a process writes (its log, through the
// copying goroutine os/exec runs for it) for a test to read and wait on.
type lockedWriter struct {
	mu   sync.Mutex
	b    *strings.Builder
	grew chan struct{} // closed, and replaced, at each write
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.grew != nil {
		close(w.grew)
		w.grew = nil
	}
	return w.b.Write(p)
}

// String is what was written so far.
func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitFor waits until what was written holds s, for at most within, and
// reports whether it does.
func (w *lockedWriter) waitFor(s string, within time.Duration) bool {
	return w.waitCount(s, 1, within)
}

// waitCount waits until what was written holds s n times, for at most
// within, and reports whether it does.
func (w *lockedWriter) waitCount(s string, n int, within time.Duration) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		if strings.Count(w.b.String(), s) >= n {
			w.mu.Unlock()
			return true
		}
		if w.grew == nil {
			w.grew = make(chan struct{})
		}
		grew := w.grew
		w.mu.Unlock()
		select {
		case <-grew:
		case <-deadline.C:
			return strings.Count(w.String(), s) >= n
		}
	}
}
