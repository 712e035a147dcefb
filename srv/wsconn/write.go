package wsconn

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/gobwas/ws"
)

// The write path: a connection's one writer at a time.

// Send queues frame without blocking. A connection whose queue is full is
// too slow to keep: it is shut down so it cannot hold up anyone else.
func (c *Conn) Send(frame []byte) bool { return c.enqueue(item{data: frame}) }

// Offer queues frame, without blocking, only while the queue stays within
// half its bounds (frames and bytes); past that it returns false and the
// connection goes on. For what another peer sends this one at will (a
// chat line): a sender faster than this peer reads is refused, rather
// than fill the queue and have this peer dropped as too slow, and the
// other half is kept for what the peer must not miss.
func (c *Conn) Offer(frame []byte) bool { return c.enqueue(item{data: frame, offered: true}) }

func (c *Conn) enqueue(it item) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	if it.offered && (len(c.queue)+1 > max(1, c.o.SendQueue/2) || c.queuedBytes+len(it.data) > c.o.SendQueueBytes/2) {
		c.mu.Unlock()
		return false
	}
	if len(c.queue) >= c.o.SendQueue || (len(c.queue) > 0 && c.queuedBytes+len(it.data) > c.o.SendQueueBytes) {
		c.dropQueuedLocked()
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
			c.queuedBytes += len(rest)
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
	c.queue, c.queuedBytes, c.writing = nil, 0, false
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
	c.queue, c.queuedBytes = nil, 0
	c.mu.Unlock()
	_ = c.nc.Close()
}

// closeSocket closes the socket (a failed write, a close sent), which ends the
// reader; a parked connection gets one started to see it.
func (c *Conn) closeSocket() {
	_ = c.nc.Close()
	c.wake()
}

// dropQueuedLocked lets go of what is queued for a peer too slow to keep:
// none of it will be sent. Only the rest of a frame the socket took in
// part stays, to be finished before the close frame.
func (c *Conn) dropQueuedLocked() {
	var keep []item
	if len(c.queue) > 0 && c.queue[0].kind == 3 {
		keep = []item{c.queue[0]}
	}
	c.queue, c.queuedBytes = keep, 0
	for _, it := range keep {
		c.queuedBytes += len(it.data)
	}
}

// pushLocked appends and makes sure a writer is draining.
func (c *Conn) pushLocked(it item) {
	c.queue = append(c.queue, it)
	c.queuedBytes += len(it.data)
	if !c.writing {
		c.writing = true
		c.writer.Go(c.writeLoop)
	}
}

func (c *Conn) ping() { c.enqueue(item{kind: 1}) }

// writeLoop drains the queue, then exits; the next Send starts another.
// While it runs it is the connection's only writer.
func (c *Conn) writeLoop() {
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue, c.queuedBytes = nil, 0
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
				c.queue, c.queuedBytes, c.writing = nil, 0, false
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
