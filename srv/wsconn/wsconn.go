// Package wsconn holds what every WebSocket endpoint of the server shares:
// a bounded send queue per connection drained by a writer goroutine that
// exists only while there is something to write, slow consumers
// disconnected rather than waited for, one heartbeat goroutine per
// endpoint, and a set that owns the connections so shutdown can end and
// await them all.
//
// A frame sent while nothing is queued is written at once by the sender,
// without blocking: one attempt on the socket, and only what the socket
// does not take goes to a writer goroutine. A broadcast to many idle
// connections therefore wakes no goroutine at all, and a stuck peer still
// holds up no one.
//
// Reading is the owner's, either on a goroutine of its own with gorilla's
// reader (the relay's few connections) or through Set.Serve, which reads
// frames itself and parks a quiet connection on an epoll set: an idle
// /ws connection then holds its socket and its small structs, and no
// goroutine or buffer.
package wsconn

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
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
	// MessageType is what Send writes: websocket.BinaryMessage (default)
	// or websocket.TextMessage.
	MessageType int
	Logger      *slog.Logger
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
	if o.MessageType == 0 {
		o.MessageType = websocket.BinaryMessage
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// writeBuffers is shared by every connection: a buffer is held only while
// a frame is written.
var writeBuffers = &sync.Pool{}

// Upgrader returns the upgrader the endpoints use: write buffers from the
// shared pool, and a 1 KiB read buffer per connection for gorilla's
// reader, or gorilla's smallest (never used) for connections read by
// Set.Serve.
func Upgrader(checkOrigin func(*http.Request) bool, served bool) websocket.Upgrader {
	// A small read buffer of its own lets the HTTP server's 4 KiB one go;
	// bigger frames just take more reads.
	size := 1024
	if served {
		size = 1
	}
	return websocket.Upgrader{CheckOrigin: checkOrigin, ReadBufferSize: size, WriteBufferPool: writeBuffers}
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

// Conn is one WebSocket connection. Its owner reads, with gorilla's
// reader on a goroutine of its own or through Set.Serve; Send may be
// called from any goroutine.
type Conn struct {
	WS    *websocket.Conn
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
	msgOp     byte
	inMsg     bool
}

// New wraps ws. The caller must call Finish when its read loop ends.
func New(ws *websocket.Conn, o Options) *Conn {
	o.Defaults()
	c := &Conn{WS: ws, o: o, done: make(chan struct{})}
	c.limit.Store(defaultReadLimit)
	if sc, ok := ws.NetConn().(syscall.Conn); ok && inlineWrites {
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
		c.Shutdown(websocket.ClosePolicyViolation, "send queue full")
		return false
	}
	if (it.kind == 0 || it.kind == 1) && !c.writing && c.raw != nil {
		// Nothing is being written: try this frame now, on this goroutine,
		// which counts as a writer until it is done (Finish waits for it).
		c.writing = true
		c.writer.Add(1)
		defer c.writer.Done()
		c.mu.Unlock()
		op := byte(opBinary)
		switch {
		case it.kind == 1:
			op = opPing // the pinger's, to every connection: no goroutine each
		case c.o.MessageType == websocket.TextMessage:
			op = opText
		}
		rest, err := c.writeNow(op, it.data)
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

// framePool holds the buffers writeNow frames into; a buffer grown by a
// big frame (an image) is left to the collector rather than kept.
var framePool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledFrame = 64 << 10

// writeNow writes payload as one unmasked, unfragmented frame of opcode op (RFC 6455
// 5.2) with a single non-blocking write. It returns what the socket did
// not take, or nil when it took everything.
func (c *Conn) writeNow(op byte, payload []byte) ([]byte, error) {
	bp := framePool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledFrame {
			framePool.Put(bp)
		}
	}()
	b := append((*bp)[:0], 0x80|op) // FIN and the opcode
	switch n := len(payload); {
	case n < 126:
		b = append(b, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, payload...)
	*bp = b
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
		_ = c.WS.NetConn().SetWriteDeadline(time.Time{})
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
	_ = c.WS.Close()
}

// closeSocket closes the socket (a failed write, a close sent), which ends the
// reader; a parked connection gets one started to see it.
func (c *Conn) closeSocket() {
	_ = c.WS.Close()
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
	c.pushLocked(item{kind: 2, data: websocket.FormatCloseMessage(code, text)})
	c.mu.Unlock()
	c.wake() // a parked connection needs a reader to see the socket close
}

// Finish is called by the owner when its read loop has returned: it shuts
// the connection down, waits for the writer and closes the socket.
func (c *Conn) Finish() {
	c.Shutdown(websocket.CloseNormalClosure, "")
	c.writer.Wait()
	_ = c.WS.Close()
	c.SetState(Closed)
}

// ExtendRead pushes the read deadline out by PongWait; owners reading
// with gorilla call it on every frame once the peer is authenticated
// (Set.Serve does it itself after KeepAlive).
func (c *Conn) ExtendRead() {
	t := time.Now().Add(c.o.PongWait)
	if c.served.Load() {
		c.readBy.Store(t.UnixNano())
		return
	}
	_ = c.WS.SetReadDeadline(t)
}

// KeepAlive makes pongs (and, for served connections, every frame) extend
// the read deadline.
func (c *Conn) KeepAlive() {
	c.keepAlive.Store(true)
	c.WS.SetPongHandler(func(string) error { c.ExtendRead(); return nil })
	c.ExtendRead()
}

// expired reports a served connection whose read deadline has passed.
func (c *Conn) expired(now time.Time) bool {
	return c.served.Load() && now.UnixNano() > c.readBy.Load()
}

func (c *Conn) ping() { c.enqueue(item{kind: 1}) }

// writeLoop drains the queue, then exits; the next Send starts another.
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
			deadline := time.Now().Add(c.o.WriteWait)
			var err error
			switch it.kind {
			case 0:
				_ = c.WS.SetWriteDeadline(deadline)
				err = c.WS.WriteMessage(c.o.MessageType, it.data)
			case 3:
				_ = c.WS.NetConn().SetWriteDeadline(deadline)
				_, err = c.WS.NetConn().Write(it.data)
			case 1:
				err = c.WS.WriteControl(websocket.PingMessage, nil, deadline)
			case 4:
				err = c.WS.WriteControl(websocket.PongMessage, it.data, deadline)
			case 2:
				_ = c.WS.WriteControl(websocket.CloseMessage, it.data, deadline)
				// Give the peer a moment to answer the close, then end the
				// reader by closing the socket.
				_ = c.WS.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
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
		c.Shutdown(websocket.CloseGoingAway, "server shutting down")
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
