package relay

import (
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// What one token may hold in the relay, whatever it sends: relay sessions
// joined over /agent/ws, /agent/ws connections, and the bytes of host
// state and user messages its relay sessions keep. One token's flood costs
// its own room only; every other token's relay sessions go on.

// Defaults of the per-token limits (Options).
const (
	DefaultMaxSessionsPerToken = 64
	// DefaultCallTimeout is what an agent's request waits for the host.
	DefaultCallTimeout = 20 * time.Second
	// maxTools is how many of its host's tools a relay session lists for
	// its agents (State.Tools), as many as an AG-UI run may declare.
	maxTools = 256
)

// tokenUse is what one token holds in the relay. It lives in Relay.use
// while one of its relay sessions exists or one of its connections is
// joined.
type tokenUse struct {
	chans    int // its relay sessions in Relay.channels
	sessions int // of those, the ones an /agent/ws peer has joined (channel.counted)
	conns    int // its joined /agent/ws connections
	// state is the bytes its relay sessions keep (channel.held); changed
	// under a channel's lock, so an atomic, not Relay.mu.
	state atomic.Int64
}

// useOf returns token's use, made if need be. Called with Relay.mu held.
func (r *Relay) useOf(token string) *tokenUse {
	u := r.use[token]
	if u == nil {
		u = &tokenUse{}
		r.use[token] = u
	}
	return u
}

// unuse forgets token's use once it holds nothing. Called with Relay.mu
// held.
func (r *Relay) unuse(token string, u *tokenUse) {
	if u.chans == 0 && u.conns == 0 && r.use[token] == u {
		delete(r.use, token)
		if len(r.use) == 0 {
			r.use = make(map[string]*tokenUse) // maps never shrink
		}
	}
}

// acquireJoin is acquire for a connection's relay.join: it refuses, before
// the relay session is made, a join past the token's connections or, for
// a relay session no /agent/ws peer of the token has joined yet, past its
// relay sessions. The connection counts until unjoin.
func (r *Relay) acquireJoin(token, name string) (*channel, *Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u := r.use[token]; u != nil {
		if u.conns >= r.o.MaxConnsPerToken {
			return nil, errorf(wire.InvalidMessage, "%d connections have joined /agent/ws with this token already, the most it may have "+
				"([relay] max_connections_per_token): close one first", u.conns)
		}
		if ch := r.channels[token+"\x00"+name]; (ch == nil || !ch.counted) && u.sessions >= r.o.MaxSessionsPerToken {
			return nil, errorf(wire.InvalidMessage, "this token has %d relay sessions open on /agent/ws already, the most it may have "+
				"([relay] max_sessions_per_token): join one of them, or leave one first", u.sessions)
		}
	}
	ch := r.acquireLocked(token, name)
	if !ch.counted {
		ch.counted = true
		ch.use.sessions++
	}
	ch.use.conns++
	return ch, nil
}

// unjoin gives back the place of a connection that joined ch.
func (r *Relay) unjoin(ch *channel) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch.use.conns--
	r.unuse(ch.token, ch.use)
}

// keptBytes is what ch keeps of what its host sent: its state, its tools
// and the user messages waiting. Called with ch.mu held.
func (ch *channel) keptBytes() int64 {
	n := len(ch.uiSpec) + len(ch.messageHistory) + len(ch.toolSchema)
	for _, t := range ch.tools {
		n += len(t)
	}
	for _, m := range ch.mailbox {
		n += len(m.Payload) + len(m.ID) + len(m.ReplyTo)
	}
	return int64(n)
}

// charge brings what ch counts against its token's budget up to date
// after a change; growth past the budget is refused (false, nothing
// counted) unless force, for the caller to undo its change. Called with
// ch.mu held.
func (ch *channel) charge(force bool) bool {
	n := ch.keptBytes()
	d := n - ch.held
	if d > 0 && !force {
		if ch.use.state.Add(d) > ch.r.o.MaxStatePerToken {
			ch.use.state.Add(-d)
			return false
		}
	} else {
		ch.use.state.Add(d)
	}
	ch.held = n
	return true
}

// overBudget is the error for a host whose message (what) would pass its
// token's budget.
func (ch *channel) overBudget(what string) *Error {
	return errorf(wire.InvalidMessage, "%s is not kept: the relay sessions of this token would keep more than %d bytes of host state and user messages "+
		"([relay] max_state_bytes_per_token); send less, or end relay sessions this token no longer uses", what, ch.r.o.MaxStatePerToken)
}
