// Package ingress serves /ingress/ws, the Ingress client protocol of seed
// 003: a client says hello with the token as its api_key and joins a
// session; it invokes agent runs whose events (run_started, delta, state,
// tool_request, approval_required, error, done) reach every device of the
// session; it answers tool requests and approvals and cancels runs. The
// runs are an Orchestrator's: an external one over HTTP and SSE
// (HTTPOrchestrator), or the built-in one whose agent is the token's MCP
// agent, through the relay session the client names (Builtin). An
// approval is also a question in the token's inbox (the hub): the first
// decision, from either place, wins.
//
// Files: ingress.go the handler and its sessions; conn.go a connection
// (hello, then messages); session.go a session's devices and events and
// the replay window; run.go runs, tool calls and approvals;
// orchestrator.go the Orchestrator interface; httporch.go the external
// orchestrator; builtin.go the built-in one; message.go the messages.
//
// Goroutines: one reader per connection (wsconn.Set); a run's Invoke, an
// approval's question in the inbox and each call to the orchestrator run
// on goroutines the Handler owns (Close cancels and waits for them).
// Timers (a tool call's deadline, a session's end) run short functions
// that take the locks as everyone else. Locks (internal/lockorder, after
// the hub's and the relay's): Handler.mu (the sessions) before session.mu
// (the goroutines' own lock is a leaf); nothing calls out of the package (orchestrator, hub,
// relay) with one of them held, except a connection's Send, which never
// blocks. The built-in orchestrator's: Builtin.mu before the relay's,
// bhost.mu under a relay session's (Deliver).
package ingress

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/ring"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/gate"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// Options configure the handler. Orchestrator and Tokens are required.
type Options struct {
	Tokens       *auth.Tokens
	Guard        *auth.Guard
	Limiter      *auth.Limiter // slows down addresses with failed hellos; nil: none
	Pending      *auth.Pending // caps connections before hello; nil: no cap
	Logger       *slog.Logger
	Orchestrator Orchestrator
	// Hub shows approvals in the token's inbox; nil: only the client
	// decides.
	Hub *hub.Hub
	// HelloTimeout closes a connection that has not said hello (default 5s).
	HelloTimeout time.Duration
	// MaxHelloFrame bounds a frame before hello (default 64 KiB).
	MaxHelloFrame int64
	// MaxFrame bounds a frame after hello (default 2 MiB); larger ones
	// close the connection with 1009.
	MaxFrame int64
	// ReplayWindow is how long a session's events are kept for a device
	// that reconnects, and how long a session without devices is kept
	// (default 60s).
	ReplayWindow time.Duration
	// ReplayBytes bounds the bytes of the events kept per session
	// (default 4 MiB), ReplayTotalBytes those of every session together
	// (default 64 MiB); past either, a session's oldest events go first.
	ReplayBytes, ReplayTotalBytes int64
	// MaxSessions bounds the sessions per token (default 64), MaxDevices
	// the devices per session (default 16), MaxRuns the open runs per
	// session (default 8).
	MaxSessions, MaxDevices, MaxRuns int
	// ApprovalTimeout is how long an approval waits for a decision before
	// it is rejected (default 10m).
	ApprovalTimeout time.Duration
	// CallTimeout bounds a call to the orchestrator: a tool result, a
	// decision, a cancel (default 15s).
	CallTimeout time.Duration
	// AgentWait is the built-in orchestrator's BuiltinOptions.AgentWait,
	// for the server to pass on (default DefaultAgentWait).
	AgentWait time.Duration
	// Conn tunes the connections (heartbeat, queue).
	Conn wsconn.Options
}

const (
	// replayEvents bounds the events kept per session.
	replayEvents = 1024
	// cancelGrace is how long a cancelled run's orchestrator has to end
	// it before its stream is cut.
	cancelGrace = 5 * time.Second
)

// Handler is the /ingress/ws endpoint and its sessions.
type Handler struct {
	o     Options
	log   *slog.Logger
	conns wsconn.Set
	ctx   context.Context // goroutines.Context: ends at Close, runs and calls stop

	mu       lockorder.Mutex[lockorder.IngressSessions]
	sessions map[string]*session // by token and session id
	byUser   map[string]*session // by token, user id and relay session

	// goroutines run the runs' Invoke, the approvals' questions and
	// the calls to the orchestrator; they are started under session.mu.
	goroutines owned.Group

	held ring.Pool // bytes in the sessions' replay windows (Max: ReplayTotalBytes)
}

// New returns the handler.
func New(o Options) *Handler {
	opt.Logger(&o.Logger)
	opt.Default(&o.HelloTimeout, 5*time.Second)
	opt.Default(&o.ReplayWindow, 60*time.Second)
	opt.Default(&o.ApprovalTimeout, 10*time.Minute)
	opt.Default(&o.CallTimeout, 15*time.Second)
	opt.Default(&o.MaxSessions, 64)
	opt.Default(&o.MaxDevices, 16)
	opt.Default(&o.MaxRuns, 8)
	opt.Default(&o.ReplayBytes, 4<<20)
	opt.Default(&o.ReplayTotalBytes, 64<<20)
	opt.Default(&o.MaxHelloFrame, 64<<10)
	opt.Default(&o.MaxFrame, 2<<20)
	// A device that comes back is sent what it missed at once, up to the
	// whole replay window: its queue holds that and as much again live
	// (the frames are the window's own), or a resume that fills the
	// socket would count it as too slow and drop it, every time.
	o.Conn.Defaults()
	o.Conn.SendQueue = max(o.Conn.SendQueue, 2*replayEvents)
	o.Conn.SendQueueBytes = max(o.Conn.SendQueueBytes, int(2*o.ReplayBytes))
	o.Conn.Text = true
	o.Conn.OwnUTF8 = true // Parse answers bad text with invalid_message
	o.Conn.Logger = o.Logger
	h := &Handler{o: o, log: o.Logger, sessions: make(map[string]*session), byUser: make(map[string]*session)}
	h.held.Max = o.ReplayTotalBytes
	h.ctx = h.goroutines.Context()
	return h
}

// Close ends every connection, cancels the runs and waits for the
// handler's goroutines. Idempotent.
func (h *Handler) Close() {
	h.goroutines.Stop()
	h.conns.Close()
	h.goroutines.Wait()
	h.mu.Lock()
	ss := h.sessions
	h.sessions, h.byUser = map[string]*session{}, map[string]*session{}
	h.mu.Unlock()
	for _, s := range ss {
		s.mu.Lock()
		if s.idle != nil {
			s.idle.Stop()
		}
		for _, tc := range s.tools {
			tc.stop()
		}
		s.dropRingLocked()
		s.mu.Unlock()
		if op, ok := h.o.Orchestrator.(SessionOpener); ok {
			op.CloseSession(s.info)
		}
	}
}

// Count reports open /ingress/ws connections.
func (h *Handler) Count() int { return h.conns.Len() }

// States counts the open connections by lifecycle state.
func (h *Handler) States() map[string]int { return h.conns.States() }

// Sessions counts the sessions held (with devices, or in their replay
// window).
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// ReplayBytes is what the sessions' replay windows hold, in bytes.
func (h *Handler) ReplayBytes() int64 { return h.held.Held() }

// IsSessionID reports whether id has the form of an Ingress session id
// ("sess_…"), as opposed to a relay session's name.
func IsSessionID(id string) bool { return strings.HasPrefix(id, "sess_") }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	door := gate.Door{Guard: h.o.Guard, Pending: h.o.Pending, Conns: &h.conns, Conn: h.o.Conn, Log: h.log}
	c := door.Accept(w, r, min(h.o.MaxHelloFrame, h.o.MaxFrame), time.Now().Add(h.o.HelloTimeout))
	if c == nil {
		return
	}
	cn := &conn{h: h, c: c, remote: r.RemoteAddr}
	h.conns.Serve(c, wsconn.Reader{Message: cn.message, Timeout: cn.timedOut, End: cn.ended})
}

// Errors of Push, mapped to /internal/send's answers.
var (
	ErrNoSession     = errors.New("no such Ingress session")
	ErrClientOffline = errors.New("client_offline")
)

// key names a session in Handler's and Builtin's maps: its parts, NUL
// between them.
func key(parts ...string) string { return strings.Join(parts, "\x00") }

// lookup returns the session of (token, id), or nil.
func (h *Handler) lookup(token, id string) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[key(token, id)]
}

// Has reports whether id names an Ingress session of token.
func (h *Handler) Has(token, id string) bool { return h.lookup(token, id) != nil }

// Status reports a session of token: whether a device is connected, how
// many are, and when it last saw a message.
func (h *Handler) Status(token, id string) (online bool, conns int, last time.Time, ok bool) {
	s := h.lookup(token, id)
	if s == nil {
		return false, 0, time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.devices) > 0, len(s.devices), s.activity, true
}

// Push delivers an event from the orchestrator (POST /internal/send) to
// every device of a session: ErrNoSession when token has none of that
// id, ErrClientOffline when no device is connected. A tool_request or
// approval_required is tracked as one streamed by a run is.
func (h *Handler) Push(token, id string, ev Event) error {
	s := h.lookup(token, id)
	if s == nil {
		return ErrNoSession
	}
	s.mu.Lock()
	online := len(s.devices) > 0
	s.mu.Unlock()
	if !online {
		return ErrClientOffline
	}
	s.emit(s.runOf(ev.RunID), ev)
	return nil
}

// CheckEvent validates an event pushed by the orchestrator.
func CheckEvent(ev Event) error {
	switch ev.Type {
	case wire.IngressToolRequest:
		if ev.ToolCallID == "" || ev.ToolName == "" {
			return errors.New("tool_request needs tool_call_id and tool_name")
		}
	case wire.IngressApprovalRequired:
		if ev.ApprovalID == "" {
			return errors.New("approval_required needs approval_id")
		}
	case "":
		return errors.New("event needs a type")
	}
	for _, v := range []string{ev.RunID, ev.ToolCallID, ev.ApprovalID} {
		if v != "" && !idPattern.MatchString(v) {
			return errors.New("ids: 1 to 128 letters, digits, '.', '_', ':', '~' or '-'")
		}
	}
	return nil
}
