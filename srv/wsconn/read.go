package wsconn

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// Reader is what a served connection's messages and end go to.
type Reader struct {
	// Message gets each complete data message, in order, on a goroutine
	// that may block; data is valid only during the call. Returning false
	// ends the connection.
	Message func(text bool, data []byte) bool
	// Timeout runs when the read deadline has passed, before the
	// connection is shut down.
	Timeout func()
	// End runs once, after the connection has ended and Finish is done.
	End func()
}

// Read states of a served connection.
const (
	readRunning = iota // a goroutine is reading it
	readParked         // no goroutine: the set's poller watches the socket
)

var (
	errParked     = errors.New("parked")
	errPeerClosed = errors.New("websocket: closed by the peer")
	errEnded      = errors.New("ended by its owner")
)

// readChunk is the buffer a reading connection borrows; bigger frames
// grow it for as long as they take.
const readChunk = 4 << 10

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 0, readChunk); return &b }}

// Serve reads c, which the caller has added to s, and hands its messages
// to r. While the peer talks a goroutine reads the connection, at first
// the caller's (Serve returns when the connection first parks or ends);
// once it has been quiet for ParkAfter (at once after a bare ping or
// pong) and is logged in (Active), the goroutine ends and the set's
// poller watches the socket instead, starting a new one when something
// arrives. An idle connection thus holds no goroutine and no read
// buffer. Where the platform or the socket (TLS) offers no poller, a
// goroutine of its own reads it for its whole life and Serve returns at
// once.
func (s *Set) Serve(c *Conn, r Reader) {
	c.reader = r
	c.set = s
	if c.raw != nil {
		if p := s.poller(); p != nil { // never a nil *poller in the interface
			c.poll = p
		}
	}
	if c.readBy.Load() == 0 {
		c.readBy.Store(time.Now().Add(c.o.PongWait).UnixNano())
	}
	c.served.Store(true)
	if c.poll == nil {
		go c.serve() // reads for the connection's life: on a fresh, small stack
		return
	}
	c.serve() // until the connection parks, on the caller's goroutine
}

// serve reads until the connection parks or ends; on the end it finishes
// the connection and tells the owner.
func (c *Conn) serve() {
	err := c.readLoop()
	if errors.Is(err, errParked) {
		return
	}
	var pe *ProtocolError
	switch {
	case errors.As(err, &pe):
		c.o.Logger.Debug("websocket protocol error", "err", err)
		c.Shutdown(pe.Code, pe.Msg)
	case IsTimeout(err) && c.reader.Timeout != nil:
		c.reader.Timeout()
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		c.drop() // the peer has gone: no close frame to send it
	}
	c.Finish()
	c.releaseBuf()
	c.msg = nil
	if c.poll != nil {
		c.poll.forget(c)
	}
	c.rmu.Lock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.rmu.Unlock()
	if c.reader.End != nil {
		c.reader.End()
	}
	c.set.Remove(c)
}

// readLoop reads and dispatches frames until the connection ends (an
// error) or parks (errParked).
func (c *Conn) readLoop() error {
	nc := c.nc
	fresh := true   // nothing read since (re)starting: read before parking
	linger := false // a data message came: stay ParkAfter before parking
	quietFrom := time.Now()
	for {
		if err := c.takeFrames(&linger, &quietFrom); err != nil {
			return err
		}
		deadline := time.Unix(0, c.readBy.Load())
		idle := false
		if c.parkable() {
			if !linger && !fresh {
				if c.park() {
					return errParked
				}
			} else if t := quietFrom.Add(c.o.ParkAfter); t.Before(deadline) {
				// Lingering after a message, or the first read after a
				// wake, which may find nothing (a stale event).
				deadline, idle = t, true
			}
		}
		fresh = false
		if c.buf == nil {
			c.buf = *readBuffers.Get().(*[]byte)
		}
		if len(c.buf) == cap(c.buf) {
			c.grow(len(c.buf) + readChunk)
		}
		_ = nc.SetReadDeadline(deadline)
		n, err := nc.Read(c.buf[len(c.buf):cap(c.buf)])
		c.buf = c.buf[:len(c.buf)+n]
		if err != nil {
			if idle && IsTimeout(err) && time.Now().UnixNano() < c.readBy.Load() {
				linger = false // quiet long enough: park on the next turn
				continue
			}
			return err
		}
	}
}

// takeFrames handles every whole frame buffered and keeps the rest.
func (c *Conn) takeFrames(linger *bool, quietFrom *time.Time) error {
	off := 0
	defer func() {
		if off > 0 {
			c.buf = c.buf[:copy(c.buf, c.buf[off:])]
		}
	}()
	for {
		limit := c.limit.Load()
		if c.inMsg {
			limit -= int64(len(c.msg))
		}
		f, n, _, err := c.parser.parse(c.buf[off:], limit, c.inMsg)
		if err != nil {
			return err
		}
		if n == 0 {
			// The buffer grows as bytes arrive (readLoop), never to the
			// length a header claims: a few bytes must not buy megabytes.
			return nil
		}
		off += n
		if c.keepAlive.Load() {
			c.extendRead()
		}
		msg, text, err := c.take(f)
		if err != nil {
			return err
		}
		if !f.op.IsControl() && c.State() == Active {
			// Talking after login: likely to say more soon. (The login
			// itself is no sign of that: a crowd logging in would
			// otherwise keep a goroutine each for ParkAfter.)
			*linger, *quietFrom = true, time.Now()
		}
		if msg != nil && !c.reader.Message(text, msg) {
			return errEnded
		}
	}
}

// take handles one frame and returns the message it completes, if any.
// The parser has checked the frame against the fragmentation state.
func (c *Conn) take(f frame) (msg []byte, text bool, err error) {
	switch f.op {
	case ws.OpPing:
		c.enqueue(item{kind: 4, data: append([]byte(nil), f.payload...)})
		return nil, false, nil
	case ws.OpPong:
		return nil, false, nil
	case ws.OpClose:
		code, err := closePayload(f.payload)
		if err != nil {
			return nil, false, err
		}
		if !c.shut.Load() { // not the answer to our own close
			c.peerClosed.Store(true)
		}
		c.Shutdown(code, "")
		return nil, false, errPeerClosed
	case ws.OpText, ws.OpBinary:
		if !f.fin {
			c.inMsg, c.msgOp = true, f.op
			c.msg = append(c.msg[:0], f.payload...)
			return nil, false, nil
		}
		msg, text = f.payload, f.op == ws.OpText
	default: // continuation
		c.msg = append(c.msg, f.payload...)
		if !f.fin {
			return nil, false, nil
		}
		c.inMsg = false
		msg, text = c.msg, c.msgOp == ws.OpText
		if cap(c.msg) > readChunk {
			c.msg = nil // a big message's buffer is not kept
		}
	}
	if text && !c.o.OwnUTF8 && !utf8.Valid(msg) { // RFC 6455 8.1
		return nil, false, protoErr(CloseInvalidPayload, "text message is not UTF-8")
	}
	if msg == nil {
		msg = []byte{}
	}
	return msg, text, nil
}

// grow makes room for at least n buffered bytes.
func (c *Conn) grow(n int) {
	nb := make([]byte, len(c.buf), max(n, 2*cap(c.buf)))
	copy(nb, c.buf)
	c.releaseBuf()
	c.buf = nb
}

// releaseBuf gives the read buffer back (its bytes are not needed).
func (c *Conn) releaseBuf() {
	if c.buf != nil && cap(c.buf) == readChunk {
		b := c.buf[:0]
		readBuffers.Put(&b)
	}
	c.buf = nil
}

// parkable: nothing half-read, logged in, not closing, and a poller.
func (c *Conn) parkable() bool {
	return c.poll != nil && len(c.buf) == 0 && !c.inMsg && c.State() == Active && !c.shut.Load()
}

// park hands the socket to the poller; the caller's goroutine then ends.
func (c *Conn) park() bool {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.shut.Load() {
		return false
	}
	c.releaseBuf()
	c.rstate = readParked // before arming: the event may come at once
	if !c.poll.arm(c) {
		c.rstate = readRunning
		return false
	}
	// Nobody reads a parked connection, so nothing else would see its
	// deadline pass: a timer of its own wakes it then, to be ended as
	// a reading one would be, at the deadline and not at some later
	// sweep. Re-armed at every park, as the deadline moves only while
	// a reader reads.
	d := time.Until(time.Unix(0, c.readBy.Load()))
	if c.expiry == nil {
		c.expiry = time.AfterFunc(d, c.expire)
	} else {
		c.expiry.Reset(d)
	}
	return true
}

// expire runs when a parked connection's read deadline was due. A stale
// run (the connection has read since, and its deadline moved) does
// nothing.
func (c *Conn) expire() {
	if c.expired(time.Now()) {
		c.wake()
	}
}

// wake starts a reader for a parked connection: the poller saw data, the
// connection is shutting down, or its deadline has passed.
func (c *Conn) wake() {
	if !c.served.Load() {
		return
	}
	c.rmu.Lock()
	if c.rstate != readParked {
		c.rmu.Unlock()
		return
	}
	c.rstate = readRunning
	c.rmu.Unlock()
	go c.serve()
}

// Parked reports whether no goroutine is reading the connection.
func (c *Conn) Parked() bool {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.rstate == readParked
}

// SetReadLimit sets the largest message the peer may send, checked
// against each frame's header before its payload is read.
func (c *Conn) SetReadLimit(n int64) { c.limit.Store(n) }

// SetReadDeadline sets when the connection ends if nothing arrives.
func (c *Conn) SetReadDeadline(t time.Time) { c.readBy.Store(t.UnixNano()) }

// watcher watches parked connections' sockets and wakes each (Conn.wake)
// once something arrives on it: the set's poller, epoll on Linux.
type watcher interface {
	// arm asks for one wake; false: the connection cannot be parked.
	arm(c *Conn) bool
	// forget drops an ended connection.
	forget(c *Conn)
}
