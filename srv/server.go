// Package srv composes agentassistant-srv's single http.Handler: the Connect
// services, /ws, /health and the embedded UI, behind the Host guard.
package srv

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/catalog"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/rpc"
	"github.com/agentassistant/agentassistant/srv/studylog"
	"github.com/agentassistant/agentassistant/srv/webui"
)

// Options configure a Server. Tokens is required.
type Options struct {
	Tokens *auth.Tokens
	Guard  *auth.Guard // nil: loopback names only
	Logger *slog.Logger
	// Inbox tunes /ws; its Hub, Tokens, Guard and Logger are filled in.
	Inbox inbox.Options
	// RPC tunes the Connect services; Hub, Relay, Tokens and Logger are
	// filled in.
	RPC rpc.Options
	// Relay tunes /agent/ws; Tokens, Guard, Logger and Logs are filled in.
	Relay relay.Options
	// StudyLogs is where relay sessions are logged; nil refuses
	// session.start.
	StudyLogs *studylog.Dir
	// Catalog is the booking host's catalog JSON; nil serves the default.
	Catalog []byte
}

// Server is the composed handler and the state behind it.
type Server struct {
	hub     *hub.Hub
	inbox   *inbox.Handler
	relay   *relay.Relay
	handler http.Handler
	tokens  *auth.Tokens
	started time.Time
}

// New builds the server.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Guard == nil {
		o.Guard = &auth.Guard{}
	}
	s := &Server{tokens: o.Tokens, started: time.Now()}
	s.hub = hub.New(hub.Options{Logger: o.Logger.With("component", "hub")})

	io := o.Inbox
	io.Hub, io.Tokens, io.Guard, io.Logger = s.hub, o.Tokens, o.Guard, o.Logger.With("component", "ws")
	s.inbox = inbox.New(io)

	rlo := o.Relay
	rlo.Tokens, rlo.Guard, rlo.Logger, rlo.Logs = o.Tokens, o.Guard, o.Logger.With("component", "relay"), o.StudyLogs
	s.relay = relay.New(rlo)

	ro := o.RPC
	ro.Hub, ro.Relay, ro.Tokens, ro.Logger = s.hub, s.relay, o.Tokens, o.Logger.With("component", "rpc")

	mux := http.NewServeMux()
	rpc.Mount(mux, ro)
	mux.Handle("/ws", s.inbox)
	mux.Handle("/agent/ws", s.relay)
	mux.HandleFunc("GET /health", s.health)
	cat := o.Catalog
	if cat == nil {
		cat, _ = catalog.Load("")
	}
	mux.Handle("GET /api/catalog", catalog.Handler(cat, s.authorized))
	mux.Handle("/", webui.Handler())
	s.handler = o.Guard.Wrap(mux)
	return s
}

// Handler is everything the server serves.
func (s *Server) Handler() http.Handler { return s.handler }

// Hub exposes the token rooms, for tests and embedding.
func (s *Server) Hub() *hub.Hub { return s.hub }

// Close ends the waiting agent calls (Unavailable) and every WebSocket
// connection, and waits for them. Idempotent.
func (s *Server) Close() error {
	s.hub.Close()
	s.relay.Close()
	return s.inbox.Close()
}

// authorized checks the token of a plain HTTP request: the
// X-Agentassistant-Token or Authorization header, or ?token=.
func (s *Server) authorized(r *http.Request) bool {
	return s.tokens.Valid(rpc.TokenFrom(nil, r.Header)) || s.tokens.Valid(r.URL.Query().Get("token"))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "missing or invalid token", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status":        "ok",
		"uptimeSeconds": int64(time.Since(s.started).Seconds()),
		"wsConnections": s.inbox.Count(),
	})
}
