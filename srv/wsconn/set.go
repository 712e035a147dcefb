package wsconn

import (
	"runtime/debug"
	"sync"
	"time"
)

// Set owns the connections of one endpoint and pings them all from one
// goroutine, which runs while the set has connections.
type Set struct {
	mu       sync.Mutex
	conns    map[*Conn]struct{}
	closed   bool
	wg       sync.WaitGroup // the connections' owners
	poll     *poller        // parked connections' sockets; made on first need
	noPoll   bool           // the platform has none
	pinger   sync.WaitGroup
	pinging  bool
	stopPing chan struct{}
	peak     int         // most connections since the set was last empty
	trimAt   int         // trim when the count falls to this (or to zero)
	trimming bool        // a trim is scheduled or running
	trim     *time.Timer // the scheduled trim, stopped by Close
	trims    sync.WaitGroup
}

// freeOSMemory gives the heap's free pages back to the OS (a variable
// for the tests).
var freeOSMemory = debug.FreeOSMemory

// trimPeak is the crowd size after whose departure memory is returned to
// the OS at once, rather than as the runtime's scavenger gets to it.
const trimPeak = 1000

// Add registers c; it reports false once the set is closed, and the caller
// must then drop the connection.
func (s *Set) Add(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*Conn]struct{})
	}
	s.conns[c] = struct{}{}
	if len(s.conns) > s.peak {
		s.peak = len(s.conns)
		s.trimAt = s.peak / 2
	}
	s.wg.Add(1)
	if !s.pinging {
		s.pinging = true
		s.stopPing = make(chan struct{})
		interval := c.o.PingInterval
		s.pinger.Go(func() { s.pingLoop(interval, s.stopPing) })
	}
	return true
}

// Remove is called when c's owner is done with it.
func (s *Set) Remove(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	n := len(s.conns)
	if n == 0 {
		s.conns = nil // maps never shrink: a crowd's buckets go with it
	}
	if s.peak >= trimPeak && !s.trimming && (n <= s.trimAt || n == 0) {
		// A crowd left: give its memory back once things settle.
		s.trimming = true
		s.trimAt = n / 2
		if n == 0 {
			s.peak = 0
		}
		// Its goroutine is the set's: Close stops it, or waits for it.
		s.trims.Add(1)
		s.trim = time.AfterFunc(time.Second, func() {
			defer s.trims.Done()
			freeOSMemory()
			s.mu.Lock()
			s.trimming = false
			s.mu.Unlock()
		})
	}
	s.mu.Unlock()
	s.wg.Done()
}

func (s *Set) pingLoop(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var batch []*Conn
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if len(s.conns) == 0 {
			s.pinging = false
			s.mu.Unlock()
			return
		}
		batch = batch[:0]
		for c := range s.conns {
			batch = append(batch, c)
		}
		s.mu.Unlock()
		for i, c := range batch {
			c.ping()
			batch[i] = nil
		}
	}
}

// States counts the open connections by state.
func (s *Set) States() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for c := range s.conns {
		out[c.State().String()]++
	}
	return out
}

// Len is the number of open connections.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close shuts every connection down and waits for their owners and the
// pinger. Idempotent.
func (s *Set) Close() {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	for c := range s.conns {
		c.Shutdown(CloseGoingAway, "server shutting down")
	}
	if first && s.pinging {
		close(s.stopPing)
	}
	if s.trim != nil && s.trim.Stop() {
		s.trims.Done() // stopped before it ran
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.pinger.Wait()
	s.trims.Wait()
	s.mu.Lock()
	p := s.poll
	s.poll = nil
	s.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// poller returns the set's poller, starting it on first use; nil where
// there is none.
func (s *Set) poller() *poller {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.poll == nil && !s.noPoll && !s.closed {
		s.poll = newPoller()
		s.noPoll = s.poll == nil
	}
	return s.poll
}
