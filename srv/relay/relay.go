// Package relay serves /agent/ws, the External Agent Protocol (mvp-0.2)
// relay between a host UI and external agents, and lets in-process agents
// (the MCP bridge's Connect service) take part like any other agent.
//
// A relay session is scoped by (token, sessionId): nothing crosses tokens.
// One host per relay session (a newer one takes over, the older is told and
// closed), any number of agents. Agents' requests go to the host with their
// ids kept; the host's replies go back to the agent that asked, its pushes
// to every agent. backendData never leaves the host. While a study session
// is active every event is written to its JSONL log before it is forwarded.
//
// Files: relay.go the /agent/ws endpoint and relay.join; envelope.go the
// frames; sessions.go where relay sessions live and when they are freed;
// channel.go a relay session; peer.go what each of its members is (Peer:
// on a socket, in process, behind another protocol, on another
// instance); members.go its host and agents, and the host's grace; route.go requests and replies between them; state.go the
// host's state and tools; mailbox.go user messages; study.go the study
// session; local.go the in-process agent of the MCP bridge; external.go a
// host behind another protocol (an AG-UI thread, srv/agui); limits.go
// what one token may hold; in cluster mode, cluster.go relay sessions
// across instances and cluster_home.go a session's home instance, and
// what follows when it goes.
//
// Goroutines: one reader per connection, owned by the relay's set of
// connections (Close waits for them); the host-grace timer (members.go)
// and a call's deadline (route.go) run on goroutines of their own and
// take the locks as everyone else does; the cluster goroutine
// (runCluster, cluster_home.go) and an external host's replies sent later
// (external.go, on the owned.Group its owner gave Adapter.Join) are
// waited for at the relay's and that owner's Close.
// Locks: Relay.mu before channel.mu (sessions.go); the order of all the
// server's locks is internal/lockorder's, explained in
// docs/architecture.md.
package relay

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/gate"
	"github.com/agentassistant/agentassistant/srv/studylog"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// Options configure the relay.
type Options struct {
	Tokens *auth.Tokens
	Guard  *auth.Guard
	Logger *slog.Logger
	// Limiter slows down addresses with too many failed joins; nil: none.
	Limiter *auth.Limiter
	// Pending caps the connections that have not joined yet (shared with
	// the other endpoints); nil: no cap.
	Pending *auth.Pending
	// Logs is where study sessions are logged; nil refuses session.start.
	Logs *studylog.Dir
	// JoinTimeout closes a connection that has not joined (default 5s).
	JoinTimeout time.Duration
	// MaxFrame bounds a frame after relay.join (default 4 MiB); larger
	// ones close with 1009.
	MaxFrame int64
	// MaxJoinFrame bounds a frame before relay.join (default 64 KiB).
	MaxJoinFrame int64
	// HostGrace is how long an active study session waits for its host to
	// come back (a reload, a network blip) before it is ended and its log
	// closed (default 2m).
	HostGrace time.Duration
	// MaxSessionsPerToken bounds the relay sessions one token's peers
	// have joined over /agent/ws (default 64): a relay.join that would
	// open one more is refused. Relay sessions of the other surfaces
	// (AG-UI threads, Ingress sessions) have their own bounds.
	MaxSessionsPerToken int
	// MaxConnsPerToken bounds the /agent/ws connections joined with one
	// token (default 256).
	MaxConnsPerToken int
	// MaxStatePerToken bounds the bytes of host state (uiSpec,
	// messageHistory, toolSchema, tools) and waiting user messages one
	// token's relay sessions keep, all together (default 64 MiB); a host
	// message past it is refused.
	MaxStatePerToken int64
	// CallTimeout is how long a request of an agent on /agent/ws
	// (tool.call, snapshot.get, session.start, session.end) waits for the
	// host's answer before the agent is told it failed (default 20s, what
	// the MCP bridge's calls wait).
	CallTimeout time.Duration
	// Conn tunes the connections (heartbeat, queue).
	Conn wsconn.Options
	// Cluster links relay sessions across instances (cluster mode,
	// cluster.go); nil: one process.
	Cluster Cluster
}

// Relay is the /agent/ws endpoint and its relay sessions.
type Relay struct {
	o     Options
	log   *slog.Logger
	conns wsconn.Set

	mu       lockorder.Mutex[lockorder.RelaySessions]
	channels map[string]*channel
	use      map[string]*tokenUse // by token: what it holds (limits.go)

	// Cluster mode (cluster.go): the records to write, instances found
	// dead (deadMu is a leaf, taken under the others), the goroutine.
	homes      homeWriter
	deadMu     sync.Mutex
	dead       map[string]bool
	goroutines owned.Group // the cluster goroutine
}

// New returns the relay.
func New(o Options) *Relay {
	opt.Logger(&o.Logger)
	opt.Default(&o.JoinTimeout, 5*time.Second)
	opt.Default(&o.MaxFrame, 4<<20)
	opt.Default(&o.MaxJoinFrame, 64<<10)
	opt.Default(&o.HostGrace, 2*time.Minute)
	opt.Default(&o.MaxSessionsPerToken, DefaultMaxSessionsPerToken)
	opt.Default(&o.MaxConnsPerToken, 256)
	opt.Default(&o.MaxStatePerToken, 64<<20)
	opt.Default(&o.CallTimeout, DefaultCallTimeout)
	o.Conn.Text = true
	o.Conn.OwnUTF8 = true // Parse answers it with INVALID_MESSAGE, as the seed asks
	o.Conn.Logger = o.Logger
	r := &Relay{o: o, log: o.Logger, channels: make(map[string]*channel), use: make(map[string]*tokenUse), homes: homeWriter{wake: owned.NewWake()}}
	if o.Cluster != nil {
		r.goroutines.Go(func() { r.runCluster(r.goroutines.Context()) })
	}
	return r
}

// DefaultSession is the relay session joined when none is named.
const DefaultSession = "default"

// Close ends every connection and waits for them. Idempotent.
func (r *Relay) Close() error {
	r.conns.Close()
	r.mu.Lock()
	for _, ch := range r.channels {
		ch.mu.Lock()
		if r.o.Cluster != nil && ch.everHome {
			ch.handOver() // a host coming back through another instance goes on with it
		} else {
			ch.closeSession()
		}
		if ch.hostGone != nil {
			ch.hostGone.Stop()
		}
		for _, c := range ch.inflight {
			c.stop()
		}
		ch.mu.Unlock()
	}
	r.mu.Unlock()
	r.goroutines.Close()
	return nil
}

// Count reports open /agent/ws connections.
func (r *Relay) Count() int { return r.conns.Len() }

// Sessions counts the relay sessions held in memory.
func (r *Relay) Sessions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.channels)
}

// States counts the open /agent/ws connections by lifecycle state.
func (r *Relay) States() map[string]int { return r.conns.States() }

// ServeHTTP takes an /agent/ws connection through the gate (srv/gate)
// and hands it to the relay's wsconn.Set, which reads its envelopes.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	door := gate.Door{Guard: r.o.Guard, Pending: r.o.Pending, Conns: &r.conns, Conn: r.o.Conn, Log: r.log}
	c := door.Accept(w, req, min(r.o.MaxJoinFrame, r.o.MaxFrame), time.Now().Add(r.o.JoinTimeout))
	if c == nil {
		return
	}
	// The set reads on this goroutine until the peer, joined, goes quiet;
	// then the goroutine ends and epoll watches the socket (as on /ws).
	rc := &relayConn{r: r, c: c, remote: req.RemoteAddr}
	r.conns.Serve(c, wsconn.Reader{Message: rc.message, Timeout: rc.timedOut, End: rc.ended})
}

// relayConn is one /agent/ws connection: its peer and relay session once
// it has joined. Its fields belong to the connection's reader.
type relayConn struct {
	r      *Relay
	c      *wsconn.Conn
	remote string
	p      *wsPeer
	ch     *channel
}

// message handles one frame; false ends the connection.
func (rc *relayConn) message(_ bool, data []byte) bool {
	r, c, ch := rc.r, rc.c, rc.ch
	env, perr := Parse(data)
	if perr != nil {
		if ch != nil && rc.p.host {
			ch.unreadable(rc.p, data, env.ID, perr)
			return true
		}
		send(c, Envelope{Type: wire.TypeError, ReplyTo: env.ID, Payload: mustJSON(perr)})
		if ch != nil {
			ch.mu.Lock()
			ch.record(studylog.Internal, Envelope{Type: wire.TypeError, ReplyTo: env.ID, Payload: mustJSON(perr)})
			ch.mu.Unlock()
		}
		return true
	}
	if ch == nil {
		c.SetState(wsconn.Authenticating)
		p, ch, ok := r.join(c, env, rc.remote)
		if !ok {
			return false
		}
		if ch != nil {
			rc.p, rc.ch = p, ch
			c.SetReadLimit(r.o.MaxFrame)
		}
		return true
	}
	if rc.p.host {
		_ = ch.fromHost(rc.p, env) // a refusal is sent to the host (fail)
	} else {
		ch.fromAgent(rc.p, env)
	}
	return true
}

// timedOut runs when the peer missed its read deadline.
func (rc *relayConn) timedOut() {
	if rc.ch == nil {
		rc.c.Shutdown(wsconn.ClosePolicyViolation, "relay.join timeout")
	}
}

// ended runs once the connection is over.
func (rc *relayConn) ended() {
	if rc.ch != nil {
		rc.ch.leave(rc.p)
		rc.r.unjoin(rc.ch)
	}
}

func send(c *wsconn.Conn, env Envelope) { c.Send(encode(env)) }

type joinPayload struct {
	Role      string `json:"role"`
	SessionID string `json:"sessionId"`
	Token     string `json:"token"`
}

// join handles frames before relay.join succeeded. ok is false when the
// connection must close.
func (r *Relay) join(c *wsconn.Conn, env Envelope, remote string) (*wsPeer, *channel, bool) {
	fail := func(code, msg string) {
		send(c, Envelope{Type: wire.TypeError, ReplyTo: env.ID, Payload: mustJSON(&Error{Code: code, Message: msg})})
	}
	if env.Type != wire.TypeJoin {
		fail(wire.InvalidMessage, "send relay.join first")
		return nil, nil, true
	}
	var jp joinPayload
	if err := json.Unmarshal(env.Payload, &jp); err != nil {
		fail(wire.InvalidMessage, "relay.join payload: role, sessionId and token must be strings")
		return nil, nil, true
	}
	if jp.Role != "host" && jp.Role != "agent" {
		fail(wire.InvalidMessage, `relay.join payload.role must be "host" or "agent"`)
		return nil, nil, true
	}
	jp.SessionID = cmp.Or(jp.SessionID, DefaultSession)
	if !wire.ValidName(jp.SessionID) {
		fail(wire.InvalidMessage, "relay.join payload.sessionId: "+wire.NameRule)
		return nil, nil, true
	}
	if r.o.Tokens == nil || !r.o.Tokens.Valid(jp.Token) {
		r.o.Limiter.Fail(c.Done(), remote) // past the budget, the answer waits
		r.log.Info("relay.join refused: wrong token", "role", jp.Role, "remote", auth.Key(remote))
		fail(wire.InvalidMessage, "relay.join: missing or invalid token")
		c.Shutdown(wsconn.ClosePolicyViolation, "invalid token")
		return nil, nil, false
	}
	c.Authenticated()
	ch, e := r.acquireJoin(jp.Token, jp.SessionID)
	if e != nil {
		r.log.Info("relay.join refused", "role", jp.Role, "relay", jp.SessionID, "err", e.Message)
		fail(e.Code, e.Message)
		c.Shutdown(wsconn.ClosePolicyViolation, "too many relay sessions or connections for this token")
		return nil, nil, false
	}
	defer r.release(ch) // once joined, the peer holds it
	p := &wsPeer{member: member{ident: wire.NewID()[:12]}, conn: c, host: jp.Role == "host"}
	c.KeepAlive()
	c.SetState(wsconn.Active)
	if p.host {
		ch.joinHost(p, env.ID)
		r.claim(ch, p)
	} else if !ch.joinAgent(p, env.ID) {
		r.unjoin(ch)
		c.Shutdown(wsconn.ClosePolicyViolation, "too many agents")
		return nil, nil, false
	}
	r.log.Info("relay joined", "role", jp.Role, "relay", jp.SessionID, "peer", p.id())
	return p, ch, true
}
