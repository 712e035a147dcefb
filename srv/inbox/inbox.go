// Package inbox serves /ws: the binary protobuf WebSocket that the inbox
// UIs (web, Flutter, any client of the wire contract) log in to, receive
// the agents' requests on, and answer through.
package inbox

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Options configure the endpoint. Zero durations and sizes take the
// documented defaults.
type Options struct {
	Hub    *hub.Hub
	Tokens *auth.Tokens
	Guard  *auth.Guard
	Logger *slog.Logger

	LoginTimeout time.Duration // default 10s: time to send UserLogin
	PingInterval time.Duration // default 30s
	PongWait     time.Duration // default 60s: silence after which a peer is dead
	WriteWait    time.Duration // default 10s: per frame write deadline
	// MaxFrame bounds a frame after login (default 16 MiB: replies carry
	// images). Before login the bound is 64 KiB.
	MaxFrame int64
	// SendQueue is frames queued per client before it counts as too slow
	// and is disconnected (default 256).
	SendQueue int
}

const loginFrameLimit = 64 << 10

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Guard == nil {
		o.Guard = &auth.Guard{}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.LoginTimeout, 10*time.Second)
	def(&o.PingInterval, 30*time.Second)
	def(&o.PongWait, 60*time.Second)
	def(&o.WriteWait, 10*time.Second)
	if o.MaxFrame <= 0 {
		o.MaxFrame = 16 << 20
	}
	if o.SendQueue <= 0 {
		o.SendQueue = 256
	}
}

// Handler is the /ws endpoint. It owns every connection it accepts; Close
// ends them all and waits.
type Handler struct {
	o        Options
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New returns the endpoint.
func New(o Options) *Handler {
	o.defaults()
	h := &Handler{o: o, log: o.Logger, conns: make(map[*conn]struct{})}
	h.upgrader = websocket.Upgrader{
		ReadBufferSize:  4096,
		WriteBufferSize: 4096,
		CheckOrigin:     o.Guard.OriginAllowed,
	}
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.o.Guard.OriginAllowed(r) {
		http.Error(w, "forbidden origin", http.StatusForbidden)
		return
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	c := newConn(h, ws)
	if !h.track(c) {
		ws.Close()
		return
	}
	defer h.untrack(c)
	c.run()
}

func (h *Handler) track(c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	return true
}

func (h *Handler) untrack(c *conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	h.wg.Done()
}

// Close disconnects every client and waits for their goroutines. It is
// idempotent.
func (h *Handler) Close() error {
	h.mu.Lock()
	h.closed = true
	for c := range h.conns {
		c.shutdown(websocket.CloseGoingAway, "server shutting down")
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}

// Count reports the open connections.
func (h *Handler) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}
