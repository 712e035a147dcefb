// Package wsconn holds what every WebSocket endpoint of the server shares:
// the handshake and the framing (gobwas/ws), a bounded send queue per
// connection drained by a writer goroutine that exists only while there is
// something to write, slow consumers disconnected rather than waited for,
// one heartbeat goroutine per endpoint, and a set that owns the
// connections so shutdown can end and await them all.
//
// Exactly one writer at a time per socket, whatever it writes (messages,
// pings, pongs, the close frame): the sender holding the connection's
// writing flag. A frame sent while nothing is queued is written at once
// by the sender, without blocking: one attempt on the socket, and only
// what the socket does not take goes to a writer goroutine, ahead of
// anything queued meanwhile. A broadcast to many idle connections
// therefore wakes no goroutine at all, and a stuck peer still holds up no
// one.
//
// Reading is Set.Serve's, which reads frames into a buffer as they arrive
// and parks a quiet connection on an epoll set: an idle connection then
// holds its socket and its small structs, and no goroutine or buffer.
package wsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobwas/ws"
)

// Options tune a connection. Zero values take the documented defaults.
type Options struct {
	PingInterval time.Duration // default 30s
	PongWait     time.Duration // default 60s
	WriteWait    time.Duration // default 10s
	SendQueue    int           // frames queued before the peer counts as too slow; default 256
	// ParkAfter is how long a served connection stays quiet after a
	// message before its reading goroutine ends (Set.Serve); default
	// 100ms: longer than the gaps in an agent's burst of requests, far
	// shorter than a person's pauses.
	ParkAfter time.Duration
	// Text makes Send write text frames; binary ones by default.
	Text bool
	// OwnUTF8 hands text messages over without checking that they are
	// UTF-8 (RFC 6455 8.1 would close with 1007): the owner answers bad
	// text in its own protocol instead (the relay's INVALID_MESSAGE).
	OwnUTF8 bool
	Logger  *slog.Logger
}

// Defaults fills in the zero values.
func (o *Options) Defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PingInterval, 30*time.Second)
	def(&o.PongWait, 60*time.Second)
	def(&o.WriteWait, 10*time.Second)
	def(&o.ParkAfter, 100*time.Millisecond)
	if o.SendQueue <= 0 {
		o.SendQueue = 256
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Upgrade answers the WebSocket handshake (RFC 6455 4.2) of r and returns
// the connection; on an error the handshake has been refused with an HTTP
// status. The caller checks Origin first, and must call Finish (Set.Serve
// does) once it is done with the connection.
func Upgrade(w http.ResponseWriter, r *http.Request, o Options) (*Conn, error) {
	o.Defaults()
	nc, rw, _, err := ws.HTTPUpgrader{Timeout: o.WriteWait}.Upgrade(r, w)
	if err != nil {
		if nc != nil {
			_ = nc.Close()
		}
		return nil, fmt.Errorf("upgrade to websocket: %w", err)
	}
	c := New(nc, o)
	if n := rw.Reader.Buffered(); n > 0 {
		// Frames the client sent right behind its request: read first.
		c.buf = make([]byte, n, max(n, readChunk))
		_, _ = rw.Reader.Read(c.buf)
	}
	return c, nil
}

// State is where a connection is in its life (seed 003).
type State int32

const (
	Created        State = iota // upgraded, nothing received yet
	Authenticating              // its first frame (login or join) is being checked
	Active                      // logged in / joined
	Closed                      // ended
)

func (s State) String() string {
	return [...]string{"CREATED", "AUTHENTICATING", "ACTIVE", "CLOSED"}[s]
}

type item struct {
	data []byte
	kind int // 0 a frame, 1 a ping, 2 the close frame, 3 the rest of a frame already begun, 4 a pong
}

// op is the opcode an item is framed with (kind 3 is not framed again).
func (c *Conn) op(it item) ws.OpCode {
	switch it.kind {
	case 1:
		return ws.OpPing
	case 2:
		return ws.OpClose
	case 4:
		return ws.OpPong
	case 0:
		if c.o.Text {
			return ws.OpText
		}
	}
	return ws.OpBinary
}

// Conn is one WebSocket connection. Set.Serve reads it; Send may be
// called from any goroutine.
type Conn struct {
	nc    net.Conn
	o     Options
	state atomic.Int32
	// unauth runs once the connection is Active or Closed: it gives back
	// its place among the connections waiting to log in.
	unauth atomic.Pointer[func()]
	raw    syscall.RawConn // the socket, for writes that must not block; nil under TLS

	mu      sync.Mutex
	queue   []item
	writing bool // a writer goroutine is draining the queue
	closing bool // Shutdown was called; only the close frame is still queued
	shut    atomic.Bool
	done    chan struct{}
	writer  sync.WaitGroup

	// Reading through Set.Serve (read.go). The fields below rmu belong to
	// whichever goroutine is reading; there is at most one.
	served    atomic.Bool
	keepAlive atomic.Bool  // any frame extends the deadline by PongWait
	limit     atomic.Int64 // largest message
	readBy    atomic.Int64 // read deadline, Unix nanoseconds
	reader    Reader
	set       *Set
	poll      *poller
	rmu       sync.Mutex
	rstate    int
	pollID    int32  // under rmu; 0: not yet registered
	armed     bool   // under rmu
	buf       []byte // bytes read and not yet taken
	msg       []byte // a fragmented message so far
	msgOp     ws.OpCode
	inMsg     bool
	parser    parser
}

// New wraps nc, a connection whose handshake is done. The caller must
// call Finish (Set.Serve does) once it is done with it.
func New(nc net.Conn, o Options) *Conn {
	o.Defaults()
	c := &Conn{nc: nc, o: o, done: make(chan struct{})}
	c.limit.Store(defaultReadLimit)
	if sc, ok := nc.(syscall.Conn); ok && inlineWrites {
		c.raw, _ = sc.SyscallConn()
	}
	return c
}

// defaultReadLimit is the largest message until the owner says otherwise.
const defaultReadLimit = 16 << 20

// Send queues frame without blocking. A connection whose queue is full is
// too slow to keep: it is shut down so it cannot hold up anyone else.
func (c *Conn) Send(frame []byte) bool { return c.enqueue(item{data: frame}) }

func (c *Conn) enqueue(it item) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	if len(c.queue) >= c.o.SendQueue {
		c.mu.Unlock()
		c.o.Logger.Warn("peer too slow, disconnecting")
		c.Shutdown(ClosePolicyViolation, "send queue full")
		return false
	}
	if it.kind != 2 && it.kind != 3 && !c.writing && c.raw != nil {
		// Nothing is being written: try this frame now, on this goroutine,
		// which is the writer until it is done (Finish waits for it). The
		// pinger's pings and a parked reader's pongs go the same way: no
		// goroutine each.
		c.writing = true
		c.writer.Add(1)
		defer c.writer.Done()
		c.mu.Unlock()
		rest, err := c.writeNow(c.op(it), it.data)
		if testHookWroteNow != nil {
			testHookWroteNow()
		}
		c.mu.Lock()
		switch {
		case err != nil:
			c.failLocked()
			c.mu.Unlock()
			c.closeSocket()
			return false
		case rest != nil: // the socket is full: the rest goes first, by a writer
			c.queue = append([]item{{kind: 3, data: rest}}, c.queue...)
		}
		if len(c.queue) > 0 {
			c.writer.Go(c.writeLoop)
		} else {
			c.writing = false
		}
		c.mu.Unlock()
		return true
	}
	c.pushLocked(it)
	c.mu.Unlock()
	return true
}

// testHookWroteNow, when set by a test, runs after a sender's own write.
var testHookWroteNow func()

// writeNow writes payload as one frame of opcode op with a single
// non-blocking write. It returns what the socket did not take, or nil when
// it took everything. Only the connection's writer calls it.
func (c *Conn) writeNow(op ws.OpCode, payload []byte) ([]byte, error) {
	f := newFrame(op, payload)
	defer putFrame(f)
	b := f.b
	var n int
	var werr error
	called := false
	err := c.raw.Write(func(fd uintptr) bool {
		called = true
		for n < len(b) { // until the socket is full
			m, e := sockWrite(fd, b[n:])
			if errors.Is(e, syscall.EINTR) {
				continue
			}
			if m > 0 {
				n += m
			}
			if e != nil {
				if !errors.Is(e, syscall.EAGAIN) {
					werr = e
				}
				break
			}
			if m <= 0 {
				break
			}
		}
		return true // one attempt only: never wait for the socket here
	})
	if !called && errors.Is(err, os.ErrDeadlineExceeded) {
		// An earlier write's deadline has passed; this write has none.
		_ = c.nc.SetWriteDeadline(time.Time{})
		return c.writeNow(op, payload)
	}
	if err == nil {
		err = werr
	}
	switch {
	case err != nil:
		return nil, err
	case n == len(b):
		return nil, nil
	}
	return append([]byte(nil), b[n:]...), nil
}

// failLocked marks the connection as failed after a write error.
func (c *Conn) failLocked() {
	c.queue, c.writing = nil, false
	if !c.closing {
		c.closing = true
		c.shut.Store(true)
		close(c.done)
	}
}

// drop ends a connection whose peer has gone away: nothing more is
// written, and the socket is closed at once.
func (c *Conn) drop() {
	c.mu.Lock()
	if !c.closing {
		c.closing = true
		c.shut.Store(true)
		close(c.done)
	}
	c.queue = nil
	c.mu.Unlock()
	_ = c.nc.Close()
}

// closeSocket closes the socket (a failed write, a close sent), which ends the
// reader; a parked connection gets one started to see it.
func (c *Conn) closeSocket() {
	_ = c.nc.Close()
	c.wake()
}

// pushLocked appends and makes sure a writer is draining.
func (c *Conn) pushLocked(it item) {
	c.queue = append(c.queue, it)
	if !c.writing {
		c.writing = true
		c.writer.Go(c.writeLoop)
	}
}

// State returns where the connection is in its life.
func (c *Conn) State() State { return State(c.state.Load()) }

// SetState moves the connection on: Created → Authenticating → Active →
// Closed. It never moves back.
func (c *Conn) SetState(s State) {
	for {
		old := c.state.Load()
		if State(old) >= s {
			return
		}
		if c.state.CompareAndSwap(old, int32(s)) {
			break
		}
	}
	if s >= Active {
		if f := c.unauth.Swap(nil); f != nil {
			(*f)()
		}
	}
}

// UntilActive runs release once, when the connection logs in (Active) or
// ends (Closed), whichever comes first; at once if it already has.
func (c *Conn) UntilActive(release func()) {
	c.unauth.Store(&release)
	if c.State() >= Active {
		if f := c.unauth.Swap(nil); f != nil {
			(*f)()
		}
	}
}

// Done is closed once the connection is shutting down.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Shutdown ends the connection: what is already queued is still written,
// then a close frame with code and text, then the socket is closed so the
// reader returns. Safe from any goroutine, any number of times.
func (c *Conn) Shutdown(code int, text string) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.shut.Store(true)
	close(c.done)
	c.pushLocked(item{kind: 2, data: ws.NewCloseFrameBody(ws.StatusCode(code), text)})
	c.mu.Unlock()
	c.wake() // a parked connection needs a reader to see the socket close
}

// Finish is called by the owner when its read loop has returned: it shuts
// the connection down, waits for the writer and closes the socket.
func (c *Conn) Finish() {
	c.Shutdown(CloseNormal, "")
	c.writer.Wait()
	_ = c.nc.Close()
	c.SetState(Closed)
}

// extendRead pushes the read deadline out by PongWait.
func (c *Conn) extendRead() {
	c.readBy.Store(time.Now().Add(c.o.PongWait).UnixNano())
}

// KeepAlive makes every frame from the peer, pongs included, extend the
// read deadline by PongWait.
func (c *Conn) KeepAlive() {
	c.keepAlive.Store(true)
	c.extendRead()
}

// expired reports a served connection whose read deadline has passed.
func (c *Conn) expired(now time.Time) bool {
	return c.served.Load() && now.UnixNano() > c.readBy.Load()
}

func (c *Conn) ping() { c.enqueue(item{kind: 1}) }

// writeLoop drains the queue, then exits; the next Send starts another.
// While it runs it is the connection's only writer.
func (c *Conn) writeLoop() {
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		if len(batch) == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		for _, it := range batch {
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.o.WriteWait))
			var err error
			if it.kind == 3 {
				_, err = c.nc.Write(it.data)
			} else {
				f := newFrame(c.op(it), it.data)
				_, err = c.nc.Write(f.b)
				putFrame(f)
			}
			if it.kind == 2 {
				// Give the peer a moment to answer the close, then end the
				// reader by closing the socket.
				time.AfterFunc(100*time.Millisecond, c.closeSocket)
				c.mu.Lock()
				c.queue, c.writing = nil, false
				c.mu.Unlock()
				return
			}
			if err != nil {
				c.mu.Lock()
				c.failLocked()
				c.mu.Unlock()
				c.closeSocket()
				return
			}
		}
	}
}

// IsTimeout reports whether a read ended on its deadline.
func IsTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

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
	peak     int  // most connections since the set was last empty
	trimAt   int  // trim when the count falls to this (or to zero)
	trimming bool // a trim is scheduled
}

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
		time.AfterFunc(time.Second, func() {
			debug.FreeOSMemory()
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
		now := time.Now()
		for i, c := range batch {
			c.ping()
			if c.expired(now) {
				c.wake() // parked past its deadline: a reader sees it out
			}
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
	s.mu.Unlock()
	s.wg.Wait()
	s.pinger.Wait()
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
