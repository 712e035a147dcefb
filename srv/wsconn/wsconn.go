// Package wsconn holds what every WebSocket endpoint of the server shares:
// one writer goroutine per connection behind a bounded queue, slow
// consumers disconnected rather than waited for, heartbeats, and a set that
// owns the connections so shutdown can end and await them all.
package wsconn

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Options tune a connection. Zero values take the documented defaults.
type Options struct {
	PingInterval time.Duration // default 30s
	PongWait     time.Duration // default 60s
	WriteWait    time.Duration // default 10s
	SendQueue    int           // default 256 frames
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

// Conn is one WebSocket connection. Its owner reads (ReadMessage) on its
// own goroutine; Send may be called from any goroutine.
type Conn struct {
	WS *websocket.Conn
	o  Options

	send      chan []byte
	done      chan struct{}
	closeOnce sync.Once
	closeMsg  []byte
	writer    sync.WaitGroup
}

// New wraps ws and starts its writer. The caller must call Finish when its
// read loop ends.
func New(ws *websocket.Conn, o Options) *Conn {
	o.Defaults()
	c := &Conn{WS: ws, o: o, send: make(chan []byte, o.SendQueue), done: make(chan struct{})}
	c.writer.Go(c.writeLoop)
	return c
}

// Send queues frame without blocking. A connection whose queue is full is
// too slow to keep: it is shut down so it cannot hold up anyone else.
func (c *Conn) Send(frame []byte) bool {
	select {
	case c.send <- frame:
		return true
	case <-c.done:
		return false
	default:
		c.o.Logger.Warn("peer too slow, disconnecting")
		c.Shutdown(websocket.ClosePolicyViolation, "send queue full")
		return false
	}
}

// Done is closed once the connection is shutting down.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Shutdown ends the connection: the writer flushes nothing more, sends a
// close frame with code and text, and closes the socket so the reader
// returns. Safe from any goroutine, any number of times.
func (c *Conn) Shutdown(code int, text string) {
	c.closeOnce.Do(func() {
		c.closeMsg = websocket.FormatCloseMessage(code, text)
		close(c.done)
	})
}

// Finish is called by the owner when its read loop has returned: it shuts
// the connection down, waits for the writer and closes the socket.
func (c *Conn) Finish() {
	c.Shutdown(websocket.CloseNormalClosure, "")
	c.writer.Wait()
	_ = c.WS.Close()
}

// ExtendRead pushes the read deadline out by PongWait; owners call it on
// every frame once the peer is authenticated.
func (c *Conn) ExtendRead() {
	_ = c.WS.SetReadDeadline(time.Now().Add(c.o.PongWait))
}

// KeepAlive makes pongs extend the read deadline.
func (c *Conn) KeepAlive() {
	c.WS.SetPongHandler(func(string) error { c.ExtendRead(); return nil })
	c.ExtendRead()
}

func (c *Conn) writeLoop() {
	ping := time.NewTicker(c.o.PingInterval)
	defer ping.Stop()
	fail := func() {
		c.Shutdown(websocket.CloseAbnormalClosure, "")
		_ = c.WS.Close() // unblock the reader
	}
	for {
		select {
		case frame := <-c.send:
			_ = c.WS.SetWriteDeadline(time.Now().Add(c.o.WriteWait))
			if err := c.WS.WriteMessage(c.o.MessageType, frame); err != nil {
				fail()
				return
			}
		case <-ping.C:
			if err := c.WS.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.o.WriteWait)); err != nil {
				fail()
				return
			}
		case <-c.done:
			// Flush what was queued before the shutdown (a refusal sent
			// just before closing must arrive), within one write deadline.
			deadline := time.Now().Add(c.o.WriteWait)
			_ = c.WS.SetWriteDeadline(deadline)
		flush:
			for {
				select {
				case frame := <-c.send:
					if c.WS.WriteMessage(c.o.MessageType, frame) != nil {
						break flush
					}
				default:
					break flush
				}
			}
			_ = c.WS.WriteControl(websocket.CloseMessage, c.closeMsg, deadline)
			// Give the peer a moment to see the close frame, then end the
			// reader by closing the socket.
			_ = c.WS.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			time.AfterFunc(100*time.Millisecond, func() { _ = c.WS.Close() })
			return
		}
	}
}

// IsTimeout reports whether a read ended on its deadline.
func IsTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// Set owns the connections of one endpoint.
type Set struct {
	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

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
	s.wg.Add(1)
	return true
}

// Remove is called when c's owner is done with it.
func (s *Set) Remove(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Len is the number of open connections.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close shuts every connection down and waits for their owners. Idempotent.
func (s *Set) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Shutdown(websocket.CloseGoingAway, "server shutting down")
	}
	s.mu.Unlock()
	s.wg.Wait()
}
