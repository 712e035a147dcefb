// Package inbox serves /ws: the binary protobuf WebSocket that the inbox
// UIs (web, Flutter, any client of the wire contract) log in to, receive
// the agents' requests on, and answer through.
//
// conn.go is a connection: its login and the frames it sends, mapped to
// the hub. frames.go encodes what the hub tells a room's clients
// (hub.Note) as WebsocketMessage frames, with the older clients' ways: a
// task report under both generations' Cmds, the pending list's name for
// it. kept.go remembers the cards of the older web UI, which never asks
// for the pending list.
package inbox

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/gate"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// Options configure the endpoint. Zero durations and sizes take the
// documented defaults.
type Options struct {
	Hub    *hub.Hub
	Tokens *auth.Tokens
	Guard  *auth.Guard
	Logger *slog.Logger
	// Limiter slows down addresses with too many failed logins; nil: none.
	Limiter *auth.Limiter
	// Pending caps the connections that have not logged in yet (shared
	// with the other endpoints); nil: no cap.
	Pending *auth.Pending
	// MaxPerToken caps the clients logged in under one token (default 256).
	MaxPerToken int

	LoginTimeout time.Duration // default 10s: time to send UserLogin
	PingInterval time.Duration // default 30s
	// ParkAfter is how long a logged-in client stays quiet before its
	// reading goroutine ends (the socket is then watched by epoll); 100ms.
	ParkAfter time.Duration
	PongWait  time.Duration // default 60s: silence after which a peer is dead
	WriteWait time.Duration // default 10s: per frame write deadline
	// MaxFrame bounds a frame after login (default 16 MiB: replies carry
	// images).
	MaxFrame int64
	// MaxLoginFrame bounds a frame before login (default 64 KiB).
	MaxLoginFrame int64
	// SendQueue is frames queued per client before it counts as too slow
	// and is disconnected (default 256).
	SendQueue int
}

func (o *Options) defaults() {
	opt.Logger(&o.Logger)
	opt.Default(&o.LoginTimeout, 10*time.Second)
	opt.Default(&o.PingInterval, 30*time.Second)
	opt.Default(&o.PongWait, 60*time.Second)
	opt.Default(&o.WriteWait, 10*time.Second)
	opt.Default(&o.MaxFrame, 16<<20)
	opt.Default(&o.MaxLoginFrame, 64<<10)
	opt.Default(&o.SendQueue, 256)
	opt.Default(&o.MaxPerToken, 256)
}

// Handler is the /ws endpoint. It owns every connection it accepts; Close
// ends them all and waits.
type Handler struct {
	o      Options
	log    *slog.Logger
	conns  wsconn.Set
	wsOpts wsconn.Options
	kept   kept // what the older web UI's pages show (kept.go)
}

// New returns the endpoint.
func New(o Options) *Handler {
	o.defaults()
	h := &Handler{o: o, log: o.Logger}
	h.wsOpts = wsconn.Options{
		PingInterval: o.PingInterval, PongWait: o.PongWait, WriteWait: o.WriteWait, ParkAfter: o.ParkAfter,
		SendQueue: o.SendQueue, Logger: o.Logger,
	}
	return h
}

// ServeHTTP takes a /ws connection through the gate (srv/gate) and
// hands it to the handler's wsconn.Set, which reads its frames.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	door := gate.Door{Guard: h.o.Guard, Pending: h.o.Pending, Conns: &h.conns, Conn: h.wsOpts, Log: h.log}
	wc := door.Accept(w, r, min(h.o.MaxLoginFrame, h.o.MaxFrame), time.Now().Add(h.o.LoginTimeout))
	if wc == nil {
		return
	}
	c := &conn{h: h, Conn: wc, id: wire.NewID()[:16], connectedAt: time.Now(), remote: r.RemoteAddr}
	// The set reads on this goroutine until the client, logged in, goes
	// quiet; then the goroutine ends and epoll watches the socket.
	h.conns.Serve(c.Conn, wsconn.Reader{Message: c.message, Timeout: c.timedOut, End: c.ended})
}

// Close disconnects every client and waits for their goroutines. It is
// idempotent.
func (h *Handler) Close() error {
	h.conns.Close()
	return nil
}

// Count reports the open connections.
func (h *Handler) Count() int { return h.conns.Len() }

// States counts the open connections by lifecycle state.
func (h *Handler) States() map[string]int { return h.conns.States() }
