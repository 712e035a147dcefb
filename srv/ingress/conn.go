package ingress

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// conn is one /ingress/ws connection; its fields belong to its reader.
type conn struct {
	h      *Handler
	c      *wsconn.Conn
	remote string
	dev    *device // set by hello
}

// device is a connection that said hello: one device of a session.
type device struct {
	c  *wsconn.Conn
	id string
	s  *session
}

func (d *device) send(ev Event) {
	if b, ok := encode(ev); ok {
		d.c.Send(b)
	}
}

func encode(ev Event) ([]byte, bool) {
	b, err := json.Marshal(ev)
	return b, err == nil // only a raw field from elsewhere could be bad, and Parse checked those
}

// reply sends an event to this connection alone.
func (cn *conn) reply(ev Event) {
	ev.Ts = cmp.Or(ev.Ts, time.Now().UnixMilli())
	if b, ok := encode(ev); ok {
		cn.c.Send(b)
	}
}

func (cn *conn) fail(m Message, e *Error) {
	cn.reply(Event{Type: wire.IngressError, RequestID: m.RequestID, RunID: m.RunID, Code: e.Code, Message: e.Message})
}

// message handles one frame; false ends the connection.
func (cn *conn) message(text bool, data []byte) bool {
	if !text {
		cn.fail(Message{}, errorf(wire.IngressInvalidMessage, "binary frames are not accepted: send each message as JSON in a text frame"))
		return true
	}
	m, perr := Parse(data)
	if cn.dev == nil && m.Type != wire.IngressHello {
		cn.fail(m, errorf(wire.IngressInvalidMessage, "send hello first"))
		return true
	}
	if perr != nil {
		cn.fail(m, perr)
		return true
	}
	if cn.dev == nil {
		return cn.hello(m)
	}
	s := cn.dev.s
	if m.SessionID != "" && m.SessionID != s.id {
		cn.fail(m, errorf(wire.IngressSessionNotFound, "this connection is in session %s, not %s", s.id, m.SessionID))
		return true
	}
	s.touch()
	var err *Error
	switch m.Type {
	case wire.IngressHello:
		err = errorf(wire.IngressInvalidMessage, "hello: this connection said hello already")
	case wire.IngressAgentInvoke:
		err = s.invoke(m)
	case wire.IngressToolResult:
		err = s.toolResult(m)
	case wire.IngressApprovalDecision:
		err = s.decide(cn.dev, m)
	case wire.IngressCancelRun:
		if m.RunID == "" {
			err = s.cancelRequest(m.RequestID)
		} else {
			err = s.cancelRun(m.RunID)
		}
	}
	if err != nil {
		cn.fail(m, err)
	}
	return true
}

// hello checks the api_key and joins the device to its session.
func (cn *conn) hello(m Message) bool {
	h, c := cn.h, cn.c
	c.SetState(wsconn.Authenticating)
	if h.o.Tokens == nil || !h.o.Tokens.Valid(m.APIKey) {
		h.o.Limiter.Fail(c.Done(), cn.remote) // past the budget, the answer waits
		h.log.Info("ingress hello refused: wrong api_key", "remote", auth.Key(cn.remote))
		msg := "hello: api_key is not a token of this server"
		if m.APIKey == "" {
			// Left out or misspelt (apiKey): say where the token goes.
			msg = "hello: no api_key: send the server's token (the ?token= of the URL agentassistant-srv printed) as \"api_key\""
		}
		cn.fail(m, errorf(wire.IngressAuthFailed, "%s", msg))
		c.Shutdown(wsconn.ClosePolicyViolation, "auth_failed")
		return false
	}
	c.Authenticated()
	meta, merr := m.meta()
	if merr != nil {
		cn.fail(m, merr)
		return true
	}
	dev := &device{c: c, id: wire.NewID()[:12]}
	s, created, e := h.join(m, meta)
	if e != nil {
		cn.fail(m, e)
		return true
	}
	// The orchestrator knows the client (the built-in one has published
	// its tools to the agent) before hello_ack tells the client to go on.
	if op, ok := h.o.Orchestrator.(SessionOpener); ok {
		op.OpenSession(s.info)
	}
	if e := s.attach(dev, m.LastSeq); e != nil {
		cn.fail(m, e)
		return true
	}
	cn.dev = dev
	c.SetReadLimit(h.o.MaxFrame)
	c.KeepAlive()
	c.SetState(wsconn.Active)
	h.log.Info("ingress hello", "session", s.id, "device", dev.id, "new", created)
	return true
}

// timedOut runs when the peer missed its read deadline.
func (cn *conn) timedOut() {
	if cn.dev == nil {
		cn.c.Shutdown(wsconn.ClosePolicyViolation, "hello timeout")
	}
}

// ended runs once the connection is over.
func (cn *conn) ended() {
	if cn.dev != nil {
		cn.dev.s.detach(cn.dev)
	}
}

// join finds or makes the session hello names and holds it for a device
// to attach (session.attach), which it must then do.
func (h *Handler) join(m Message, meta ClientMeta) (*session, bool, *Error) {
	token := m.APIKey
	relaySession := cmp.Or(meta.Session, "default")
	h.mu.Lock()
	defer h.mu.Unlock()
	var s *session
	created := false
	if m.SessionID != "" {
		s = h.sessions[key(token, m.SessionID)]
		if s == nil || s.info.UserID != m.UserID {
			return nil, false, errorf(wire.IngressSessionNotFound, "hello: session %s is not known (it ended, or belongs to another user): say hello without session_id", m.SessionID)
		}
	} else if s = h.byUser[key(token, m.UserID, relaySession)]; s == nil {
		n := 0
		for _, o := range h.sessions {
			if o.info.Token == token {
				n++
			}
		}
		if n >= h.o.MaxSessions {
			return nil, false, errorf(wire.IngressInvalidMessage, "hello: this token has %d sessions already (the most it may have); let one end, or join one with its session_id", h.o.MaxSessions)
		}
		s = newSession(h, SessionInfo{Token: token, SessionID: "sess_" + wire.NewID()[:16], UserID: m.UserID, Meta: meta}, relaySession)
		h.sessions[key(token, s.id)] = s
		h.byUser[key(token, m.UserID, relaySession)] = s
		created = true
	}
	s.mu.Lock()
	s.joining++
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	s.mu.Unlock()
	return s, created, nil
}

// free forgets s if it still has no device: its replay window is over.
func (h *Handler) free(s *session) {
	h.mu.Lock()
	s.mu.Lock()
	s.idle = nil // fired
	gone := len(s.devices) == 0 && s.joining == 0 && h.sessions[key(s.info.Token, s.id)] == s
	if gone {
		delete(h.sessions, key(s.info.Token, s.id))
		if h.byUser[key(s.info.Token, s.info.UserID, s.relay)] == s {
			delete(h.byUser, key(s.info.Token, s.info.UserID, s.relay))
		}
		s.freed = true
		s.dropRingLocked()
	}
	s.mu.Unlock()
	h.mu.Unlock()
	if gone {
		h.log.Info("ingress session ended", "session", s.id)
		if op, ok := h.o.Orchestrator.(SessionOpener); ok {
			op.CloseSession(s.info)
		}
	}
}
