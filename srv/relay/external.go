package relay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// An external host is a host that speaks neither /agent/ws nor Go calls of
// its own: an adapter (an AG-UI thread) that turns the relay's envelopes
// into its own protocol and its protocol into host messages. It takes
// part exactly as a WebSocket host does: same routing, checks, logging.

// Deliverer receives what the relay sends an external host. Deliver is
// called with the relay session's lock held: it must neither block nor
// call back into the relay (queue the envelope and act on it later).
type Deliverer interface {
	Deliver(env Envelope) bool
}

// What a host is, in relay.replaced's "by": the host that took over.
const (
	HostKindPage    = "page"    // a page on /agent/ws (the booking page, an mvp-0.2 host)
	HostKindAGUI    = "agui"    // an AG-UI frontend's thread (srv/agui)
	HostKindIngress = "ingress" // an Ingress client (srv/ingress)
)

// TypeAgentWaiting is ours, sent only to an external host: an in-process
// agent waits for a user message (wait_user_message), it yields the turn.
const TypeAgentWaiting = "relay.agent.waiting"

// TypeUserPosted is ours, sent only to an external host: a user.message
// is in the mailbox. A TypeAgentWaiting delivered before it was a wait
// that message ends.
const TypeUserPosted = "relay.user.posted"

// External is an external host of one relay session, its Peer: its
// adapter turns what it is sent into its own protocol, for a frontend
// that takes part in runs.
type External struct {
	member
	ch   *channel
	d    Deliverer
	kind string
	left sync.Once
}

func (e *External) deliver(env Envelope, _ *encoded) bool {
	env.V = wire.Version
	return e.d.Deliver(env)
}

func (e *External) hostKind() string { return e.kind }
func (*External) inRuns() bool       { return true }

// JoinHost makes d, a host of kind (HostKindAGUI, HostKindIngress), the
// host of (token, session), replacing any host there (which is told, as
// when a newer WebSocket host joins). d first receives relay.joined. Call
// Leave when done.
func (r *Relay) JoinHost(token, session, kind string, d Deliverer) *External {
	session = cmp.Or(session, DefaultSession)
	ch := r.acquire(token, session)
	defer r.release(ch) // the host holds it from now on
	e := &External{member: member{ident: wire.NewID()[:12]}, ch: ch, d: d, kind: kind}
	ch.joinHost(e, "")
	r.claim(ch, e)
	r.log.Info("relay joined", "role", "host", "relay", session, "peer", e.ident, "kind", "external")
	return e
}

// Send is a message from the host (state.updated, tool.result with
// replyTo, user.message, session.started, ...), handled as a WebSocket
// host's frame is. It does nothing once the host was replaced or left.
//
// It returns the relay's refusal (a *Error), also delivered to the host
// as an error envelope: the message was not taken (a user.message or a
// state.updated past the token's budget, [relay] max_state_bytes_per_token),
// or, for a tool.result or snapshot.state, its answer went on but its
// state was not kept. An in-process host tells its person; nil when all
// was taken.
func (e *External) Send(env Envelope) error {
	if err := e.ch.fromHost(e, env.whole()); err != nil {
		return err
	}
	return nil
}

// Waiting reports whether the request the host received under id still
// has an agent waiting for its answer.
func (e *External) Waiting(id string) bool {
	e.ch.mu.Lock()
	defer e.ch.mu.Unlock()
	c := e.ch.inflight[id]
	return c != nil && c.from != nil && e.ch.host == e
}

// Leave takes the host out of the relay session; as for a WebSocket host,
// its study session waits HostGrace for a host to come back. Idempotent.
func (e *External) Leave() {
	e.left.Do(func() { e.ch.leave(e) })
}

// AgentWaiting reports whether an in-process agent waits for a user
// message now: it has yielded the turn.
func (e *External) AgentWaiting() bool {
	e.ch.mu.Lock()
	defer e.ch.mu.Unlock()
	return e.ch.waiters > 0
}

// Unheard reports whether a user message waits with no agent to hear it:
// no in-process agent has taken it (wait_user_message) and no agent is
// joined on /agent/ws (which would have been sent it).
func (e *External) Unheard() bool {
	e.ch.mu.Lock()
	defer e.ch.mu.Unlock()
	return len(e.ch.mailbox) > 0 && len(e.ch.agents) == 0
}

// AgentPresent reports whether an agent is in the relay session now: one
// joined on /agent/ws (or through another instance), or an in-process
// agent in the middle of a call (it holds the relay session).
func (e *External) AgentPresent() bool {
	e.ch.r.mu.Lock()
	refs := e.ch.refs
	e.ch.r.mu.Unlock()
	e.ch.mu.Lock()
	defer e.ch.mu.Unlock()
	return refs > 0 || len(e.ch.agents) > 0
}

// agentWaits counts an in-process agent that starts waiting for a user
// message (its caller counts it out) and tells a host in runs it yields
// the turn. Called with mu held.
func (ch *channel) agentWaits() {
	ch.waiters++
	ch.turn(TypeAgentWaiting)
}

// posted tells a host in runs a user message was queued.
// Called with mu held, so it is ordered with agentWaits.
func (ch *channel) posted() { ch.turn(TypeUserPosted) }

func (ch *channel) turn(typ string) {
	if ch.host != nil && ch.host.inRuns() {
		ch.host.deliver(Envelope{Type: typ, Payload: json.RawMessage("{}")}, nil)
	}
}

// Fail answers the request the host received under id, on the host's
// behalf, with TOOL_EXECUTION_FAILED and msg: for a host that knows it
// will never answer (its frontend is gone) and can say why better than
// the caller's timeout would. It is logged as the relay's own error. It
// does nothing once the request is answered, or the host replaced or
// gone, and reports whether it answered.
func (e *External) Fail(id, msg string) bool {
	e.ch.mu.Lock()
	defer e.ch.mu.Unlock()
	c := e.ch.inflight[id]
	if c == nil || e.ch.host != e {
		return false
	}
	delete(e.ch.inflight, id)
	c.stop()
	if c.from != nil {
		e.ch.fail(c.from, c.origID, errorf(wire.ToolExecutionFailed, "%s", msg))
	}
	return true
}

// Record writes env in the active study session's log, for what the
// host's own protocol has beyond the relay's messages (an AG-UI run's
// start and end): direction is studylog.Out for the host's own doing,
// studylog.In for what it was sent. Like every event, it is on disk when
// Record returns. Nothing is written without an active study session, or
// once the host was replaced or left.
func (e *External) Record(direction string, env Envelope) {
	e.ch.mu.Lock()
	defer e.ch.mu.Unlock()
	if e.ch.host == e {
		e.ch.record(direction, env.whole())
	}
}

// ConnectAgent says how to connect an agent to relay session name: the
// MCP bridge's command (no -session for DefaultSession), the server's
// /mcp, or /agent/ws. Every front door's "no agent" error says it so.
func ConnectAgent(name string) string {
	bridge := "agentassistant-mcp -session " + name + " (or"
	if name == DefaultSession {
		bridge = "agentassistant-mcp (without -session; or"
	}
	return fmt.Sprintf("start the MCP client with %s point it at the server's /mcp?session=%s), or join /agent/ws as an agent in session %q",
		bridge, name, name)
}

// Adapter is what every adapter of an external host shares (an AG-UI
// thread, an Ingress session's built-in host): embedded in its
// Deliverer, it joins as the host and answers the requests every host
// answers alike, off the relay's lock.
type Adapter struct {
	Ext     *External // set by Join, before any reply goes
	replies *owned.Group
	ready   chan struct{} // closed once Ext is set
}

// Join makes d, the Deliverer that embeds a, the host of (token,
// session), a host of kind, as JoinHost does; the replies go on
// goroutines of replies, the adapter's owner's, which waits for them.
func (a *Adapter) Join(r *Relay, token, session, kind string, replies *owned.Group, d Deliverer) {
	a.replies, a.ready = replies, make(chan struct{})
	a.Ext = r.JoinHost(token, session, kind, d)
	close(a.ready) // replies queued while joining may go now
}

// Lifecycle answers session.start, session.end (with its payload) and
// snapshot.get (whose uiSpec is spec's, called now under the caller's
// lock), and reports whether env was one of them. Called from Deliver.
func (a *Adapter) Lifecycle(env Envelope, spec func() any) bool {
	switch env.Type {
	case wire.TypeSessionStart:
		a.ReplyLater(Envelope{Type: wire.TypeSessionStarted, ReplyTo: env.ID, Payload: json.RawMessage("{}")})
	case wire.TypeSessionEnd:
		a.ReplyLater(Envelope{Type: wire.TypeSessionEnded, ReplyTo: env.ID, Payload: env.Payload})
	case wire.TypeSnapshotGet:
		b, _ := json.Marshal(map[string]any{"uiSpec": spec()})
		a.ReplyLater(Envelope{Type: wire.TypeSnapshotState, ReplyTo: env.ID, Payload: b})
	default:
		return false
	}
	return true
}

// ReplyLater sends env as the host, on a goroutine of the owner's:
// Deliver may not call back into the relay. Once the owner closes,
// nothing is sent.
func (a *Adapter) ReplyLater(env Envelope) {
	a.replies.Go(func() {
		<-a.ready
		_ = a.Ext.Send(env) // a reply: it reaches its agent even when its state is not kept
	})
}
