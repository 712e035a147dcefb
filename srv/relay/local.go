package relay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// Local is an in-process agent of one relay session: the MCP bridge's
// Connect service acts through it, with the same checks, routing and
// logging as an agent on /agent/ws.
type Local struct {
	ch     *channel
	closed sync.Once
}

// Local returns the in-process agent of (token, session). It holds the
// relay session until Close: call Close when done.
func (r *Relay) Local(token, session string) *Local {
	if session == "" {
		session = DefaultSession
	}
	return &Local{ch: r.acquire(token, session)}
}

// Close lets go of the relay session; l is not to be used afterwards.
// Idempotent.
func (l *Local) Close() {
	l.closed.Do(func() { l.ch.r.release(l.ch) })
}

// ValidSession reports whether name may name a relay session.
func ValidSession(name string) bool { return name == "" || namePattern.MatchString(name) }

// Request sends typ with payload to the host and returns the answer: the
// host's reply, or an "error" envelope from the relay or the host. It
// returns ctx.Err() if ctx ends first; the request is then forgotten.
func (l *Local) Request(ctx context.Context, typ string, payload json.RawMessage) (Reply, error) {
	p := &peer{role: "agent", local: make(chan Reply, 1)}
	l.ch.fromAgent(p, Envelope{V: wire.Version, Type: typ, Payload: payload})
	defer l.forget(p)
	select {
	case r := <-p.local:
		return r, nil
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	}
}

// Post sends a message that gets no reply (agent.message). It returns the
// error envelope if the relay or the host refuses it within grace.
func (l *Local) Post(ctx context.Context, typ string, payload json.RawMessage, grace time.Duration) (Envelope, bool) {
	p := &peer{role: "agent", local: make(chan Reply, 1)}
	l.ch.fromAgent(p, Envelope{V: wire.Version, Type: typ, Payload: payload})
	defer l.forget(p)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case r := <-p.local:
		return r.Envelope, r.Type == wire.TypeError
	case <-t.C:
	case <-ctx.Done():
	}
	return Envelope{}, false
}

func (l *Local) forget(p *peer) {
	l.ch.mu.Lock()
	l.ch.forget(p)
	l.ch.mu.Unlock()
}

// State is the host's latest published state, backendData stripped.
type State struct {
	UISpec         json.RawMessage
	MessageHistory json.RawMessage
	// ToolSchema is the tools allowed now (the current stage's).
	ToolSchema json.RawMessage
	// Tools is every tool the host has declared in any stage.
	Tools         []json.RawMessage
	HostOnline    bool
	ActiveSession string
	// Version counts state.updated pushes.
	Version uint64
}

// State returns the latest state.
func (l *Local) State() State {
	l.ch.mu.Lock()
	defer l.ch.mu.Unlock()
	return l.ch.stateLocked()
}

func (ch *channel) stateLocked() State {
	s := State{
		UISpec: ch.uiSpec, MessageHistory: ch.messageHistory, ToolSchema: ch.toolSchema,
		Tools: append([]json.RawMessage(nil), ch.tools...), HostOnline: ch.host != nil, Version: ch.stateVersion,
	}
	if ch.log != nil {
		s.ActiveSession = ch.log.ID()
	}
	return s
}

// WaitState waits until a state.updated newer than version arrives, for at
// most d, and returns the latest state either way.
func (l *Local) WaitState(ctx context.Context, version uint64, d time.Duration) State {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		l.ch.mu.Lock()
		s := l.ch.stateLocked()
		wake := l.ch.stateWake
		l.ch.mu.Unlock()
		if s.Version > version {
			return s
		}
		select {
		case <-wake:
		case <-t.C:
			return l.State()
		case <-ctx.Done():
			return l.State()
		}
	}
}

// NextUserMessage returns the oldest user.message not yet taken, waiting
// for one until ctx ends. Messages typed while no one was waiting are kept
// (up to 256) so nothing a participant typed is lost.
func (l *Local) NextUserMessage(ctx context.Context) (Envelope, bool) {
	for {
		l.ch.mu.Lock()
		if len(l.ch.mailbox) > 0 {
			env := l.ch.mailbox[0]
			l.ch.mailbox = l.ch.mailbox[1:]
			l.ch.mu.Unlock()
			return env, true
		}
		wake := l.ch.mailboxWake
		l.ch.agentWaits()
		l.ch.mu.Unlock()
		var gone bool
		select {
		case <-wake:
		case <-ctx.Done():
			gone = true
		}
		l.ch.mu.Lock()
		l.ch.waiters--
		l.ch.mu.Unlock()
		if gone {
			return Envelope{}, false
		}
	}
}

// ErrClientOffline: no host is connected to the relay session.
var ErrClientOffline = errors.New("client_offline")

// Status reports the relay session of (token, session): whether its host
// is connected, how many peers are, and when it last saw a message.
func (r *Relay) Status(token, session string) (hostOnline bool, conns int, lastActivity time.Time) {
	ch := r.lookup(token, session)
	if ch == nil {
		return false, 0, time.Time{}
	}
	defer r.release(ch)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	conns = len(ch.agents)
	if ch.host != nil {
		conns++
	}
	return ch.host != nil, conns, ch.activity
}

// Push delivers an event from an external orchestrator to the host of
// (token, session), as the relay's own message; ErrClientOffline when no
// host is connected. backendData is never involved: this goes to the host.
func (r *Relay) Push(token, session string, typ string, payload json.RawMessage) error {
	ch := r.lookup(token, session)
	if ch == nil {
		return ErrClientOffline
	}
	defer r.release(ch)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.host == nil {
		return ErrClientOffline
	}
	env := Envelope{Type: typ, Payload: payload}
	ch.record(studylog.In, env)
	ch.host.deliver(env)
	return nil
}
