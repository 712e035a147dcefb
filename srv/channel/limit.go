package channel

import (
	"sync"
	"time"
)

// window counts events of each key in windows of time: a log line or a
// mail that anyone reaching the server can cause, bounded. The zero
// value is ready; the keys whose window is over are forgotten when room
// is needed, so its map holds maxWindowKeys at most.
type window struct {
	mu   sync.Mutex // held alone
	keys map[string]*windowCount
}

type windowCount struct {
	start   time.Time
	used    int
	refused int // refused in the windows since the last allowed
}

// maxWindowKeys bounds the keys a window counts: past it the oldest
// window's key is forgotten (and allowed again).
const maxWindowKeys = 1024

// allow takes one event of key at now: ok when it is one of the first
// n of its window of length per; refused, when ok, is how many were
// refused since the last allowed.
func (w *window) allow(key string, n int, per time.Duration, now time.Time) (ok bool, refused int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys == nil {
		w.keys = map[string]*windowCount{}
	}
	c := w.keys[key]
	if c == nil {
		if len(w.keys) >= maxWindowKeys {
			w.pruneLocked(per, now)
		}
		c = &windowCount{start: now}
		w.keys[key] = c
	}
	if now.Sub(c.start) >= per || now.Before(c.start) {
		c.start, c.used = now, 0
	}
	if c.used >= n {
		c.refused++
		return false, 0
	}
	c.used++
	refused, c.refused = c.refused, 0
	return true, refused
}

// pruneLocked forgets the keys whose window is over, or else the one
// whose window began first.
func (w *window) pruneLocked(per time.Duration, now time.Time) {
	var oldest *windowCount
	var oldestKey string
	for k, c := range w.keys {
		if now.Sub(c.start) >= per {
			delete(w.keys, k)
			continue
		}
		if oldest == nil || c.start.Before(oldest.start) {
			oldest, oldestKey = c, k
		}
	}
	if len(w.keys) >= maxWindowKeys {
		delete(w.keys, oldestKey)
	}
}
