package relay

import (
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// Peer is a member of a relay session, its host or one of its agents: a
// WebSocket of /agent/ws (wsPeer), a call of an in-process agent
// (localPeer, Local's), a host behind another protocol (External, an
// Adapter's: an AG-UI thread, an Ingress session) or another instance of
// a cluster (remotePeer). The relay session routes, checks and logs alike
// for every kind; what tells them apart is what Peer asks.
type Peer interface {
	// deliver hands env to the peer; false: it cannot take it now (its
	// queue is full), and its sender is told. Called with the relay
	// session's lock held: it neither blocks nor calls back into the
	// relay. shared, if not nil, keeps env's encoding for other sockets.
	deliver(env Envelope, shared *encoded) bool
	// id names a host in the logs and in the cluster's record.
	id() string
	// hostKind says what host the peer is: relay.replaced's "by", to the
	// host it replaces.
	hostKind() string
	// inRuns: the host's frontend takes part in runs (an AG-UI run, an
	// Ingress client's): each toolSchema it publishes is its whole set of
	// tools, which replaces the earlier ones (a booking page's stages
	// each add theirs), and it is told when the turn passes
	// (TypeAgentWaiting, TypeUserPosted).
	inRuns() bool
	// inProcess: the agent waits for its answers itself, with a deadline
	// of its own: each of its requests is tracked, even without an id,
	// and none has the relay's deadline.
	inProcess() bool
	// instance is the cluster instance the peer is on; "" for this one.
	instance() string
}

// member answers what Peer asks as most peers do: embedded in each kind,
// which says only where it differs.
type member struct{ ident string }

func (m member) id() string     { return m.ident }
func (member) hostKind() string { return "" }
func (member) inRuns() bool     { return false }
func (member) inProcess() bool  { return false }
func (member) instance() string { return "" }

// encoded is an envelope's encoding for sockets, made once however many
// it goes to: their send queues share the bytes, so a host's big state
// to many slow agents is held once, not once per agent.
type encoded struct{ b []byte }

func (e *encoded) of(env Envelope) []byte {
	if e == nil {
		return encode(env)
	}
	if e.b == nil {
		e.b = encode(env)
	}
	return e.b
}

// wsPeer is a peer on a WebSocket of /agent/ws.
type wsPeer struct {
	member
	conn *wsconn.Conn
	host bool // joined as the host: its frames are the host's
}

// deliver queues env; relay.replaced is the last a host hears, then its
// socket closes.
func (p *wsPeer) deliver(env Envelope, shared *encoded) bool {
	ok := p.conn.Send(shared.of(env))
	if env.Type == wire.TypeReplaced {
		p.conn.Shutdown(4001, "replaced by a newer host")
	}
	return ok
}

func (*wsPeer) hostKind() string { return HostKindPage }

// localPeer is one call of an in-process agent (Local).
type localPeer struct {
	member
	ch      *channel
	replies chan Reply
}

func (ch *channel) localPeer(n int) *localPeer {
	return &localPeer{ch: ch, replies: make(chan Reply, n)}
}

// Reply is what an in-process request gets back: the envelope, and the
// state version when it was delivered, so a caller can wait for the
// state.updated that follows it (and not take an earlier one).
type Reply struct {
	Envelope
	StateVersion uint64
}

func (p *localPeer) deliver(env Envelope, _ *encoded) bool {
	select {
	case p.replies <- Reply{Envelope: env, StateVersion: p.ch.stateVersion}:
		return true
	default:
		return false
	}
}

func (*localPeer) inProcess() bool { return true }

// remotePeer is a peer on another instance (cluster.go): the home, as
// seen from an instance with agents, or an instance with agents, as seen
// from the home. Delivering to it sends a frame of its kind there.
type remotePeer struct {
	member
	ch          *channel
	inst, frame string // frame: FrameAgent to the home, FrameHost to an instance's agents
}

func (ch *channel) remotePeer(instance, frame string) *remotePeer {
	return &remotePeer{ch: ch, inst: instance, frame: frame}
}

func (p *remotePeer) deliver(env Envelope, _ *encoded) bool {
	env = env.whole()
	r := p.ch.r
	if err := r.o.Cluster.Send(p.inst, p.ch.token, p.ch.name, Frame{Kind: p.frame, From: r.o.Cluster.Instance(), Env: &env}); err != nil {
		r.log.Warn("relay frame not sent to another instance", "instance", p.inst, "type", env.Type, "err", err)
		return false
	}
	return true
}

func (p *remotePeer) instance() string { return p.inst }
