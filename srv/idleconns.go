package srv

import (
	"context"
	"io"
	"net"
	"net/http"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// IdleConns bounds the HTTP connections that are doing nothing for
// anyone: accepted and not in a handler, so still reading a request's
// headers (slowloris), idle between keep-alive requests, or finishing a
// request after its handler returned. Such a connection costs a file
// descriptor and buffers until ReadHeaderTimeout or IdleTimeout, and
// needs no token: without a bound, a flood of them from one address runs
// the server out of descriptors and nobody, the owner included, can
// connect.
//
// The bound is in all and per address (auth.Key). A connection that would
// pass it is not refused: the oldest waiting connection (of its address,
// when that bound is the one passed) is closed to make room, so a flood
// turns itself over and the owner's fresh request gets through. A
// connection inside a handler (an agent's call waiting for its answer, an
// SSE stream) does not count and is never closed; WebSockets leave the
// count when they are hijacked (the WebSocket endpoints bound their own).
//
// An http.Server takes it through NewHTTPServer: ConnContext and
// ConnState see a connection come, go idle and go; Wrap's handler sees a
// request enter and leave. Each is one lock and O(1) work. The zero
// value is not usable; use NewIdleConns.
type IdleConns struct {
	max, perAddr int

	mu      lockorder.Mutex[lockorder.IdleConns]
	waiting *auth.Slots[*idleConn] // by address
	conns   map[net.Conn]*idleConn
	peak    int
	evicted uint64
}

type idleConn struct {
	ic       *IdleConns
	c        net.Conn
	handlers int    // requests of it in a handler (HTTP/2 runs several)
	done     bool   // hijacked, closed or evicted: never counted again
	stop     func() // while in waitingWhile: ends its wait (HTTP/2's streams end with their connection anyway)
	slot     auth.Slot[*idleConn]
}

// Defaults of NewIdleConns.
const (
	DefaultMaxIdleConns        = 1024
	DefaultMaxIdleConnsPerAddr = 256
)

// NewIdleConns bounds waiting connections to max, perAddr of them from
// one address (defaults 1024 and 256).
func NewIdleConns(max, perAddr int) *IdleConns {
	opt.Default(&max, DefaultMaxIdleConns)
	opt.Default(&perAddr, DefaultMaxIdleConnsPerAddr)
	return &IdleConns{max: max, perAddr: perAddr, waiting: auth.NewSlots[*idleConn](max, perAddr), conns: make(map[net.Conn]*idleConn)}
}

type idleConnKey struct{}

// ConnContext is the http.Server's: it registers c, before its StateNew,
// and gives its requests their connection's entry.
func (ic *IdleConns) ConnContext(ctx context.Context, c net.Conn) context.Context {
	e := &idleConn{ic: ic, c: c}
	e.slot = auth.Slot[*idleConn]{Key: auth.Key(c.RemoteAddr().String()), Value: e}
	ic.mu.Lock()
	ic.conns[c] = e
	ic.mu.Unlock()
	return context.WithValue(ctx, idleConnKey{}, e)
}

// ConnState is the http.Server's: a new or idle connection waits, one
// whose request has arrived does not, a hijacked or closed one is
// forgotten.
func (ic *IdleConns) ConnState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew, http.StateIdle:
		ic.mu.Lock()
		e := ic.conns[c]
		var victim *idleConn
		// Idle after a request, it waits already, since its handler
		// returned: it keeps its place.
		if e != nil && !e.done && e.handlers == 0 && !e.slot.In() {
			victim = ic.waitLocked(e)
		}
		ic.mu.Unlock()
		victim.close()
	case http.StateActive:
		// A request's headers are in: it is on its way to the handler
		// (Wrap), and no longer waits meanwhile. Closed now, it would be
		// lost to a client that cannot send it again (http.Transport
		// retries only idempotent requests).
		ic.mu.Lock()
		if e := ic.conns[c]; e != nil {
			e.slot.Remove()
		}
		ic.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		ic.mu.Lock()
		if e := ic.conns[c]; e != nil {
			e.done = true
			e.slot.Remove()
			delete(ic.conns, c)
		}
		ic.mu.Unlock()
	}
}

// Wrap counts the requests in h: their connection does not wait while
// one of them is in it.
func (ic *IdleConns) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e, _ := r.Context().Value(idleConnKey{}).(*idleConn)
		if e == nil {
			h.ServeHTTP(w, r)
			return
		}
		e.enter()
		// Back to waiting as soon as no handler holds it: what the server
		// still does (the response's last bytes, a body left unread) is
		// bounded as waiting is.
		defer e.leave()
		h.ServeHTTP(w, r)
	})
}

// waitingWhile runs f with the request of ctx counted as out of its
// handler: what f waits for is nobody's (a failed login held back by the
// Limiter), so its connection is bounded and may be closed to make room
// as any other waiting one. done, given to f, is closed then, or when ctx
// ends: a request whose body is unread never sees its context end when
// its connection closes (net/http reads nothing more until the body is
// read), so f would wait on for a connection long gone.
func waitingWhile(ctx context.Context, f func(done <-chan struct{})) {
	e, _ := ctx.Value(idleConnKey{}).(*idleConn)
	if e == nil {
		f(ctx.Done())
		return
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	e.ic.mu.Lock()
	e.stop = stop
	if e.done {
		// Closed already (evicted between its headers and its handler):
		// nothing is waiting for the answer.
		stop()
	}
	e.ic.mu.Unlock()
	e.leave()
	defer e.enter()
	f(ctx.Done())
}

// public serves h, whose answers are anyone's (the UI's files), with its
// connection counted as waiting: a peer that asks for a large file and
// never reads it blocks the handler's write for as long as it likes, and
// such a connection does nothing for anyone. Counted, a flood of them
// from one address turns itself over as slowloris connections do,
// instead of holding a descriptor and a goroutine each until the server
// can accept nothing.
func public(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		waitingWhile(r.Context(), func(<-chan struct{}) { h.ServeHTTP(w, r) })
	})
}

// bodyWaits serves h, which knows who sends a request only from its body
// (a capability in it, a signature over it), with its connection counted
// as waiting until the body has arrived: a body that trickles in waits
// for nobody, and without the count a flood of them from one address
// would each hold a descriptor and a goroutine until the body deadline,
// however many. Once the body is in, the request is someone's.
func bodyWaits(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e, _ := r.Context().Value(idleConnKey{}).(*idleConn)
		if e == nil || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		e.leave()
		b := &arriving{ReadCloser: r.Body, e: e}
		r.Body = b
		defer b.arrived()
		h.ServeHTTP(w, r)
	})
}

// arriving is a body still on its way; read by its handler's goroutine
// only.
type arriving struct {
	io.ReadCloser
	e    *idleConn
	done bool
}

func (b *arriving) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.arrived()
	}
	return n, err
}

// arrived counts the request in its handler again, once.
func (b *arriving) arrived() {
	if !b.done {
		b.done = true
		b.e.enter()
	}
}

// enter counts a request of e's connection in a handler: the connection
// no longer waits.
func (e *idleConn) enter() {
	e.ic.mu.Lock()
	e.handlers++
	e.stop = nil
	e.slot.Remove()
	e.ic.mu.Unlock()
}

// leave uncounts it: with no other in a handler the connection waits
// again, and another may be closed to make room for it.
func (e *idleConn) leave() {
	ic := e.ic
	ic.mu.Lock()
	e.handlers--
	var victim *idleConn
	if e.handlers == 0 && !e.done {
		victim = ic.waitLocked(e)
	}
	ic.mu.Unlock()
	victim.close()
}

// waitLocked counts e as waiting, the newest, and returns the
// connection that must be closed to make room for it, if any.
func (ic *IdleConns) waitLocked(e *idleConn) *idleConn {
	e.slot.Remove()
	victim, _ := ic.waiting.Add(&e.slot, nil) // any may be evicted: never refused
	if n := ic.waiting.Len(); n > ic.peak {
		ic.peak = n
	}
	if victim == nil {
		return nil
	}
	victim.Value.done = true
	if victim.Value.stop != nil {
		victim.Value.stop()
	}
	ic.evicted++
	return victim.Value
}

// close closes an evicted connection, outside the lock: without the TLS
// close_notify, which could wait on a peer that reads nothing.
func (e *idleConn) close() {
	if e == nil {
		return
	}
	c := e.c
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	_ = c.Close()
}

// IdleStats is what IdleConns reports (/health, with the token).
type IdleStats struct {
	Waiting int    `json:"waiting"` // connections waiting now
	Peak    int    `json:"peak"`    // the most that ever waited at once
	Evicted uint64 `json:"evicted"` // closed to make room for a newer one
	Max     int    `json:"max"`
	PerAddr int    `json:"perAddress"`
}

// Stats reports the waiting connections.
func (ic *IdleConns) Stats() IdleStats {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return IdleStats{Waiting: ic.waiting.Len(), Peak: ic.peak, Evicted: ic.evicted, Max: ic.max, PerAddr: ic.perAddr}
}
