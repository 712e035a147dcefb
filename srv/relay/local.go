package relay

import (
	"cmp"
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
	return &Local{ch: r.acquire(token, cmp.Or(session, DefaultSession))}
}

// Close lets go of the relay session; l is not to be used afterwards.
// Idempotent.
func (l *Local) Close() {
	l.closed.Do(func() { l.ch.r.release(l.ch) })
}

// ValidSession reports whether name may name a relay session.
func ValidSession(name string) bool { return name == "" || wire.ValidName(name) }

// Request sends typ with payload to the host and returns the answer: the
// host's reply, or an "error" envelope from the relay or the host. It
// returns ctx.Err() if ctx ends first; the request is then forgotten.
func (l *Local) Request(ctx context.Context, typ string, payload json.RawMessage) (Reply, error) {
	p := l.ch.localPeer(1)
	l.ch.fromAgent(p, Envelope{V: wire.Version, Type: typ, Payload: payload})
	defer l.forget(p)
	select {
	case r := <-p.replies:
		return r, nil
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	}
}

// Post sends a message that gets no reply (agent.message). It returns the
// error envelope if the relay or the host refuses it within grace.
func (l *Local) Post(ctx context.Context, typ string, payload json.RawMessage, grace time.Duration) (Envelope, bool) {
	p := l.ch.localPeer(1)
	l.ch.fromAgent(p, Envelope{V: wire.Version, Type: typ, Payload: payload})
	defer l.forget(p)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case r := <-p.replies:
		return r.Envelope, r.Type == wire.TypeError
	case <-t.C:
	case <-ctx.Done():
	}
	return Envelope{}, false
}

func (l *Local) forget(p Peer) {
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

// State returns the latest state: the home's, when the host is on
// another instance (its Version is still this instance's count, which is
// what WaitState compares).
func (l *Local) State() State {
	l.ch.mu.Lock()
	s := l.ch.stateLocked()
	home := l.ch.home()
	l.ch.mu.Unlock()
	if home == "" {
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, err := l.ch.r.o.Cluster.Request(ctx, home, l.ch.token, l.ch.name, Frame{Kind: FrameState, From: l.ch.r.o.Cluster.Instance()})
	if err != nil || f.State == nil {
		return s // what this instance has seen of it
	}
	rs := *f.State
	rs.Version = s.Version
	return rs
}

// localState is State without asking the home.
func (l *Local) localState() State {
	l.ch.mu.Lock()
	defer l.ch.mu.Unlock()
	return l.ch.stateLocked()
}

func (ch *channel) stateLocked() State {
	return State{
		UISpec: ch.uiSpec, MessageHistory: ch.messageHistory, ToolSchema: ch.toolSchema,
		Tools: append([]json.RawMessage(nil), ch.tools...), HostOnline: ch.hostOnline(), Version: ch.stateVersion,
		ActiveSession: ch.activeSession(),
	}
}

// WaitState waits until a state.updated newer than version arrives, for at
// most d, and returns the latest state either way.
func (l *Local) WaitState(ctx context.Context, version uint64, d time.Duration) State {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		l.ch.mu.Lock()
		s := l.ch.stateLocked()
		wake, away := l.ch.stateWake, l.ch.away()
		l.ch.mu.Unlock()
		if s.Version > version {
			if away {
				return l.State()
			}
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
	if l.ch.r.o.Cluster != nil {
		return l.nextClustered(ctx)
	}
	return l.nextLocal(ctx)
}

// nextClustered takes the next user message from the home's mailbox,
// wherever the home is, in waits of at most takeChunk; with no home, or
// when it is here, from this instance's.
func (l *Local) nextClustered(ctx context.Context) (Envelope, bool) {
	c := l.ch.r.o.Cluster
	for ctx.Err() == nil {
		l.ch.mu.Lock()
		home := l.ch.home()
		l.ch.mu.Unlock()
		if home == "" {
			cctx, cancel := context.WithTimeout(ctx, takeChunk)
			env, ok := l.nextLocal(cctx)
			cancel()
			if ok {
				return env, true
			}
			continue
		}
		wait := takeChunk
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		// The answer is awaited even if ctx ends meanwhile: a message the
		// home gave away must not be dropped (it goes back, below).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+5*time.Second)
		f, err := c.Request(rctx, home, l.ch.token, l.ch.name, Frame{Kind: FrameTake, From: c.Instance(), Wait: wait.Milliseconds()})
		cancel()
		switch {
		case err == nil && f.Env != nil && ctx.Err() == nil:
			return *f.Env, true
		case err == nil && f.Env != nil:
			_ = c.Send(home, l.ch.token, l.ch.name, Frame{Kind: FramePutBack, From: c.Instance(), Env: f.Env})
			return Envelope{}, false
		case err != nil || f.Err != "":
			// The home moved or is gone: look again shortly.
			t := time.NewTimer(250 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	return Envelope{}, false
}

// nextLocal takes the next user message from this instance's mailbox.
func (l *Local) nextLocal(ctx context.Context) (Envelope, bool) {
	for {
		l.ch.mu.Lock()
		if len(l.ch.mailbox) > 0 {
			env := l.ch.mailbox[0]
			l.ch.mailbox = l.ch.mailbox[1:]
			l.ch.charge(true)
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
		if r.o.Cluster != nil {
			if h, ok := r.o.Cluster.Home(token, session); ok && !r.isDead(h.Instance) {
				return h.Online, 0, time.Time{}
			}
		}
		return false, 0, time.Time{}
	}
	defer r.release(ch)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	conns = len(ch.agents) - len(ch.proxies)
	if ch.isHome() {
		conns++
	}
	return ch.hostOnline(), conns, ch.activity
}

// Push delivers an event from an external orchestrator to the host of
// (token, session), as the relay's own message; ErrClientOffline when no
// host is connected. backendData is never involved: this goes to the host.
func (r *Relay) Push(token, session string, typ string, payload json.RawMessage) error {
	if r.o.Cluster != nil {
		if h, ok := r.o.Cluster.Home(token, session); ok && h.Online && h.Instance != r.o.Cluster.Instance() && !r.isDead(h.Instance) {
			env := Envelope{V: wire.Version, Type: typ, Payload: payload}
			return r.o.Cluster.Send(h.Instance, token, session, Frame{Kind: FramePush, From: r.o.Cluster.Instance(), Env: &env})
		}
	}
	ch := r.lookup(token, session)
	if ch == nil {
		return ErrClientOffline
	}
	defer r.release(ch)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.isHome() {
		return ErrClientOffline
	}
	env := Envelope{Type: typ, Payload: payload}
	ch.record(studylog.In, env)
	ch.host.deliver(env, nil)
	return nil
}
