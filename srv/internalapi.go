package srv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// InboxSession names the /ws room of a token in the internal API; any
// other session id is a relay session (relay.join's sessionId).
const InboxSession = "inbox"

// sessionStatus: GET /internal/sessions/{id}/status (seed 003's internal
// API), for the token presented.
func (s *Server) sessionStatus(w http.ResponseWriter, r *http.Request) {
	tok := s.tokenOf(r)
	id := r.PathValue("id")
	if !validSessionID(id) || r.URL.EscapedPath() != "/internal/sessions/"+id+"/status" {
		badSessionID(w)
		return
	}
	var online bool
	var conns int
	var last time.Time
	if id == InboxSession {
		conns, last = s.hub.Status(tok)
		online = conns > 0
	} else if on, n, at, ok := s.ingress.Status(tok, id); ok {
		online, conns, last = on, n, at
	} else if ingress.IsSessionID(id) {
		notFound(w, id)
		return
	} else {
		online, conns, last = s.relay.Status(tok, id)
	}
	out := map[string]any{"session_id": id, "online": online, "connection_count": conns, "last_activity_at": int64(0)}
	if !last.IsZero() {
		out["last_activity_at"] = last.UnixMilli()
	}
	writeJSON(w, http.StatusOK, out)
}

// validSessionID: "inbox", an Ingress session's id (sess_ and letters)
// or a relay session's name, which is never "." or "..": a path segment
// of its own that no URL cleaning changes.
func validSessionID(id string) bool {
	return id != "" && id != "." && id != ".." && relay.ValidSession(id)
}

func badSessionID(w http.ResponseWriter) {
	writeError(w, http.StatusBadRequest, wire.IngressInvalidMessage,
		`the session id is "inbox", an Ingress session's id (sess_…) or a relay session's name `+
			`(1 to 64 letters, digits, '.', '_' or '-', not "." or ".."), written as is in the path: no escapes, no slashes`)
}

// route serves r through the mux, but for a path under /internal/ that
// the mux would redirect (uncleanInternal).
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if s.uncleanInternal(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// uncleanInternal answers a path under /internal/ that URL cleaning would
// change ("..", ".", "//"): ServeMux would redirect it to another route,
// and a session id is never such a segment. It reports whether it
// answered.
func (s *Server) uncleanInternal(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, "/internal/") || r.Method == http.MethodConnect {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean == p {
		return false
	}
	s.requireToken(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { badSessionID(w) })).ServeHTTP(w, r)
	return true
}

// send: POST /internal/send {"session_id", "event": {"type", ...}} pushes
// an event to the host of a relay session; client_offline when none is
// connected (seed 003).
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SessionID string          `json:"session_id"`
		Event     json.RawMessage `json:"event"`
	}
	body, err := io.ReadAll(r.Body) // bounded by the server (MaxBody)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, wire.IngressInvalidMessage, fmt.Sprintf("the body is over %d bytes", tooBig.Limit))
		return
	case err != nil:
		// Cut off at the body deadline, or broken off.
		writeError(w, http.StatusRequestTimeout, wire.IngressInvalidMessage, "the body did not arrive whole in time; send it again")
		return
	}
	// The event goes on as written: it must be the one read here.
	if err := strictjson.Check(body); err != nil {
		writeError(w, http.StatusBadRequest, wire.IngressInvalidMessage, "the body is refused: "+err.Error())
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, wire.IngressInvalidMessage,
			`the body must be a JSON object {"session_id": "...", "event": {"type": "...", ...}}`)
		return
	}
	if s.ingress.Has(s.tokenOf(r), req.SessionID) {
		s.sendIngress(w, r, req.SessionID, req.Event)
		return
	}
	if ingress.IsSessionID(req.SessionID) {
		notFound(w, req.SessionID)
		return
	}
	var ev struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(req.Event, &ev) != nil || ev.Type == "" || !relay.ValidSession(req.SessionID) || req.SessionID == "" {
		writeError(w, http.StatusBadRequest, wire.IngressInvalidMessage, "need session_id (a relay session) and event with a type")
		return
	}
	pushed(w, req.SessionID, s.relay.Push(s.tokenOf(r), req.SessionID, ev.Type, req.Event))
}

// sendIngress pushes an orchestrator's event to the devices of an
// Ingress session.
func (s *Server) sendIngress(w http.ResponseWriter, r *http.Request, id string, raw json.RawMessage) {
	var ev ingress.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		writeError(w, http.StatusBadRequest, wire.IngressInvalidMessage,
			"event: not an event of seed 003 (an object whose fields have their types: ts a number, the ids and texts strings)")
		return
	}
	if err := ingress.CheckEvent(ev); err != nil {
		writeError(w, http.StatusBadRequest, wire.IngressInvalidMessage, err.Error())
		return
	}
	if !slices.Contains(orchestratorEvents, ev.Type) {
		writeError(w, http.StatusBadRequest, wire.IngressInvalidMessage, fmt.Sprintf(
			"event type %q is not one the orchestrator may push to an Ingress session: it may push %s "+
				"(hello_ack and run_started are the server's own)", ev.Type, strings.Join(orchestratorEvents, ", ")))
		return
	}
	pushed(w, id, s.ingress.Push(s.tokenOf(r), id, ev))
}

// pushed answers for an event pushed to session id (a relay's or an
// Ingress session's) with the outcome err.
func pushed(w http.ResponseWriter, id string, err error) {
	switch {
	case errors.Is(err, relay.ErrClientOffline), errors.Is(err, ingress.ErrClientOffline):
		writeError(w, http.StatusConflict, "client_offline", "session "+id+" has no active connections")
	case errors.Is(err, ingress.ErrNoSession):
		notFound(w, id)
	case err != nil:
		writeError(w, http.StatusInternalServerError, "internal_error", err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	}
}

// orchestratorEvents are the event types of seed 003's Ingress → client
// messages that the orchestrator may push (POST /internal/send): all but
// hello_ack and run_started, which the server sends itself for the
// connection and the run it started. Any other type would be answered ok
// and reach no device, or reach it as a message the protocol does not
// have.
var orchestratorEvents = []string{wire.IngressDelta, wire.IngressState, wire.IngressToolRequest,
	wire.IngressApprovalRequired, wire.IngressError, wire.IngressDone}

// notFound answers for an Ingress session id that is no session of the
// token presented: it never was, it has ended, or it is another token's.
func notFound(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, "session_not_found", "session "+id+" is not an Ingress session of this token (it has ended, or never was)")
}

// tokenOf is the token requireToken checked ("" for none, or for
// conflicting ones, which no token matches).
func (s *Server) tokenOf(r *http.Request) string {
	tok, _ := auth.RequestToken(r)
	return tok
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with seed 003's error body: code is its error code,
// msg says what to do about it.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"ok": false, "error": code, "message": msg})
}
