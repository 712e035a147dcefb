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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobwas/ws"

	"github.com/agentassistant/agentassistant/internal/opt"
)

// Options tune a connection. Zero values take the documented defaults.
type Options struct {
	PingInterval time.Duration // default 30s
	PongWait     time.Duration // default 60s
	WriteWait    time.Duration // default 10s
	SendQueue    int           // frames queued before the peer counts as too slow; default 256
	// SendQueueBytes bounds the bytes queued for the peer the same way:
	// a peer that reads nothing holds at most this much; default 16 MiB.
	SendQueueBytes int
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
	opt.Default(&o.PingInterval, 30*time.Second)
	opt.Default(&o.PongWait, 60*time.Second)
	opt.Default(&o.WriteWait, 10*time.Second)
	opt.Default(&o.ParkAfter, 100*time.Millisecond)
	opt.Default(&o.SendQueue, 256)
	opt.Default(&o.SendQueueBytes, 16<<20)
	opt.Logger(&o.Logger)
}

// hasToken reports whether header key lists token (RFC 9110 5.6.1:
// comma-separated, case-insensitive).
func hasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Subprotocol is selected when a client offers it: a browser that offers
// subprotocols (the token's, auth.TokenProtocol, among them) must be
// answered one of them, and this one carries nothing. Clients that offer
// none get none, as before.
const Subprotocol = "agentassistant"

// Upgrade answers the WebSocket handshake (RFC 6455 4.2) of r and returns
// the connection; on an error the handshake has been refused with an HTTP
// status. The caller checks Origin first, and must call Finish (Set.Serve
// does) once it is done with the connection.
func Upgrade(w http.ResponseWriter, r *http.Request, o Options) (*Conn, error) {
	o.Defaults()
	u := ws.HTTPUpgrader{Timeout: o.WriteWait, Protocol: func(p string) bool { return p == Subprotocol }}
	if r.Method != http.MethodGet {
		// The upgrader refuses it with 405; the header it writes on a
		// refusal (and on a success, hence only here) says what is
		// allowed (RFC 9110 15.5.6), and that the connection ends with
		// the answer, as it does: a client must not send its next
		// request on it.
		u.Header = http.Header{"Allow": {http.MethodGet}, "Connection": {"close"}}
	} else if !hasToken(r.Header, "Upgrade", "websocket") || !hasToken(r.Header, "Connection", "upgrade") {
		// No handshake: the upgrader refuses it with 400 and the
		// connection ends with the answer, which says so.
		u.Header = http.Header{"Connection": {"close"}}
	}
	nc, rw, _, err := u.Upgrade(r, w)
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
		_, _ = rw.Read(c.buf)
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
	// offered: queued only within half the queue's bounds (Offer).
	offered bool
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

	mu    sync.Mutex
	queue []item
	// queuedBytes is what queue holds for the peer (its frames'
	// payloads); guarded by mu.
	queuedBytes int
	writing     bool // a writer goroutine is draining the queue
	closing     bool // Shutdown was called; only the close frame is still queued
	shut        atomic.Bool
	done        chan struct{}
	writer      sync.WaitGroup

	// peerClosed: the peer sent a close frame (PeerClosed).
	peerClosed atomic.Bool

	// Reading through Set.Serve (read.go). The fields below rmu belong to
	// whichever goroutine is reading; there is at most one.
	served    atomic.Bool
	keepAlive atomic.Bool  // any frame extends the deadline by PongWait
	limit     atomic.Int64 // largest message
	readBy    atomic.Int64 // read deadline, Unix nanoseconds
	reader    Reader
	set       *Set
	poll      watcher     // nil: the connection is never parked
	expiry    *time.Timer // under rmu: wakes it parked at its read deadline
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

// Authenticated gives the connection's place among those not logged in
// back (the release of UntilActive) as soon as its token has proved
// valid, before its owner has finished logging it in: from then on no
// newcomer can evict it.
func (c *Conn) Authenticated() {
	if f := c.unauth.Swap(nil); f != nil {
		(*f)()
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
	var body []byte // a peer's close without a code is answered without one
	switch {
	case code == closeNoStatus:
	case code < 1000 || code > 4999 || code == 1006 || code == 1015:
		code = 1011 // not a code a close frame may carry: an internal error
		fallthrough
	default:
		body = ws.NewCloseFrameBody(ws.StatusCode(code), text) // #nosec G115 -- within 1000..4999
	}
	c.pushLocked(item{kind: 2, data: body})
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

// expired reports a served connection whose read deadline has come.
func (c *Conn) expired(now time.Time) bool {
	return c.served.Load() && now.UnixNano() >= c.readBy.Load()
}

// PeerClosed reports whether the peer closed the connection with a close
// frame of its own (a page unloading, a client signing off), rather than
// the network dropping it or this side ending it (a peer answering our
// close frame does not count).
func (c *Conn) PeerClosed() bool { return c.peerClosed.Load() }

// IsTimeout reports whether a read ended on its deadline.
func IsTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
