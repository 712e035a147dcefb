package wsconn

import "sync"

// Evictable closes a connection that has not logged in when the cap on
// such connections needs its place (auth.Pending): Evict may come before
// the connection exists (during the upgrade) or after, from any goroutine.
type Evictable struct {
	mu      sync.Mutex
	c       *Conn
	evicted bool
}

// EvictText is the close reason an evicted connection gets, with code
// 1013 (try again later).
const EvictText = "too many connections are waiting to log in; try again"

// Evict closes the connection, now or as soon as Set gives it.
func (e *Evictable) Evict() {
	e.mu.Lock()
	c := e.c
	e.evicted = true
	e.mu.Unlock()
	if c != nil {
		c.Shutdown(CloseTryAgainLater, EvictText)
	}
}

// Set gives the connection, once upgraded.
func (e *Evictable) Set(c *Conn) {
	e.mu.Lock()
	e.c = c
	evicted := e.evicted
	e.mu.Unlock()
	if evicted {
		c.Shutdown(CloseTryAgainLater, EvictText)
	}
}
