package relay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// Relay sessions across instances (cluster mode). Options.Cluster nil: one
// process, and nothing in this file runs.
//
// The instance whose host is connected is the relay session's home: it
// holds what a relay session holds in one process (the calls in flight,
// the host's state, the mailbox, the study log). Every other instance
// with agents in the session is, to the home, one agent (a proxy peer,
// channel.proxies); to those agents, the home is their host (a remote
// peer in channel.host). So the routing, checks and logging of route.go
// run unchanged on both sides, and an envelope crosses NATS at most once
// each way: an agent's request goes to the home under the id its own
// instance gave it (track), the home's reply comes back to that instance
// under that id, which routes it to the agent; a push comes once per
// instance and is pushed there to every agent.
//
// Who the home is: a record per relay session in a key-value bucket,
// written by compare-and-set (Cluster.Claim): a host joining writes its
// instance, and the newest host wins wherever it joined. Every instance
// follows the bucket (Relay.Moved): the instance that held the host before
// tells it it was replaced, hands over its study session and lets its
// agents follow the host. The study log is written by the home; a host
// that moves takes the study session with it, and the new home appends to
// the log of the same name in its own data directory (Dir.Resume).
//
// An instance that dies: its agents' peers are gone with it, and the
// home's answers to them go nowhere; its host's agents elsewhere find out
// from the watchdog (every second, while they have something there, each
// home instance is asked whether it is alive) and their calls fail as if
// the host had disconnected.

// Cluster is the relay's link to the other instances (srv/cluster).
// Send must not block: it is called with a relay session's lock held.
type Cluster interface {
	Instance() string
	// Home is the last record of (token, session) this instance has seen.
	Home(token, session string) (Home, bool)
	// Claim makes this instance the home of (token, session): it writes
	// next(the record there) by compare-and-set, trying again if another
	// write came first, and returns the record it replaced.
	Claim(ctx context.Context, token, session string, next func(prev Home) Home) (Home, error)
	// Update writes h if the record still names this instance.
	Update(ctx context.Context, token, session string, h Home) error
	// Delete removes the record if it still names this instance and host
	// h.Host, and no host is online there.
	Delete(ctx context.Context, token, session string, h Home) error
	// Send delivers f to the relay session on instance, in order.
	Send(instance, token, session string, f Frame) error
	// Request asks the relay session on instance and waits for the answer.
	Request(ctx context.Context, instance, token, session string, f Frame) (Frame, error)
	// Reserve takes study session id for this instance, cluster-wide;
	// false: another has it.
	Reserve(ctx context.Context, id string) (bool, error)
	// Alive reports whether instance still answers.
	Alive(ctx context.Context, instance string) bool
}

// Home is a relay session's record in the cluster: where its host is.
type Home struct {
	Instance string `json:"instance"`
	Host     string `json:"host"`              // the host peer's id
	Online   bool   `json:"online"`            // false: the host left, its grace runs
	Session  string `json:"session,omitempty"` // the active study session
}

// Frame is what instances send each other about one relay session.
type Frame struct {
	Kind string    `json:"k"`
	From string    `json:"from"`
	Env  *Envelope `json:"env,omitempty"`
	// Dir is a record's direction (studylog.In, Out, Internal).
	Dir string `json:"dir,omitempty"`
	// Wait bounds a take, in milliseconds.
	Wait  int64  `json:"wait,omitempty"`
	State *State `json:"state,omitempty"`
	Err   string `json:"err,omitempty"`
}

// Kinds of frames.
const (
	FrameAgent   = "agent"   // an agent's envelope, to the home
	FrameHost    = "host"    // the home's envelope, to an instance's agents
	FrameRecord  = "record"  // an event for the home's study log
	FrameJoin    = "join"    // the instance has agents there: send it the pushes
	FrameLeave   = "leave"   // the instance has no agents there any more
	FramePush    = "push"    // Relay.Push, to the home
	FramePutBack = "putback" // a user message taken but not delivered
	FrameState   = "state"   // request: the home's state
	FrameTake    = "take"    // request: the next user message, waiting Wait
)

// isHome reports whether the host is connected here. Called with mu held.
func (ch *channel) isHome() bool { return ch.host != nil && ch.host.instance() == "" }

// away reports whether the host is on another instance.
func (ch *channel) away() bool { return ch.home() != "" }

// home is the instance the host is on if not this one, else "".
func (ch *channel) home() string {
	if ch.host == nil {
		return ""
	}
	return ch.host.instance()
}

// hostOnline: the host is connected here, or at the home.
func (ch *channel) hostOnline() bool { return ch.isHome() || (ch.away() && ch.homeOnline) }

// activeSession is the study session's id, here or at the home.
func (ch *channel) activeSession() string {
	if ch.log != nil {
		return ch.log.ID()
	}
	if ch.away() {
		return ch.remoteSession
	}
	return ""
}

// attachHome makes a new relay session follow its home on another
// instance, if the cluster knows one. Called with both locks held.
func (r *Relay) attachHome(ch *channel) {
	if r.o.Cluster == nil {
		return
	}
	h, ok := r.o.Cluster.Home(ch.token, ch.name)
	if !ok || h.Instance == r.o.Cluster.Instance() || r.isDead(h.Instance) {
		return
	}
	ch.host = ch.remotePeer(h.Instance, FrameAgent)
	ch.homeOnline, ch.remoteSession = h.Online, h.Session
}

// proxy is the peer standing for instance's agents in a relay session
// homed here. Called with mu held.
func (ch *channel) proxy(instance string) *remotePeer {
	if p := ch.proxies[instance]; p != nil {
		return p
	}
	p := ch.remotePeer(instance, FrameHost)
	ch.proxies[instance] = p
	ch.agents[p] = struct{}{}
	return p
}

// dropProxies forgets the other instances' agents: the host moved away
// and they follow it. Called with mu held.
func (ch *channel) dropProxies() {
	for inst, p := range ch.proxies {
		delete(ch.proxies, inst)
		delete(ch.agents, p)
		ch.forget(p)
	}
}

// Receive handles a frame another instance sent to the relay session
// (token, session) here. Frames of one instance arrive in order.
func (r *Relay) Receive(token, session string, f Frame) {
	switch f.Kind {
	case FrameAgent:
		if f.Env == nil {
			return
		}
		ch := r.acquire(token, session)
		defer r.release(ch)
		ch.mu.Lock()
		p := ch.proxy(f.From)
		ch.mu.Unlock()
		ch.fromAgent(p, *f.Env)
	case FrameJoin:
		ch := r.lookup(token, session)
		if ch == nil {
			return // no host here: the record will say so
		}
		ch.mu.Lock()
		if ch.isHome() || (ch.host == nil && ch.everHome) {
			ch.proxy(f.From)
		}
		ch.mu.Unlock()
		r.release(ch)
	case FrameHost:
		if f.Env == nil {
			return
		}
		ch := r.lookup(token, session)
		if ch == nil {
			// Nobody here any more: the home may forget this instance.
			_ = r.o.Cluster.Send(f.From, token, session, Frame{Kind: FrameLeave, From: r.o.Cluster.Instance()})
			return
		}
		defer r.release(ch)
		ch.fromHome(f.From, *f.Env)
	case FrameRecord:
		if f.Env == nil {
			return
		}
		ch := r.lookup(token, session)
		if ch == nil {
			return
		}
		defer r.release(ch)
		ch.mu.Lock()
		if ch.log != nil {
			ch.record(f.Dir, *f.Env)
		}
		ch.mu.Unlock()
	case FrameLeave:
		ch := r.lookup(token, session)
		if ch == nil {
			return
		}
		ch.mu.Lock()
		if p := ch.proxies[f.From]; p != nil {
			delete(ch.proxies, f.From)
			delete(ch.agents, p)
			ch.forget(p)
		}
		ch.mu.Unlock()
		r.release(ch)
	case FramePush:
		if f.Env != nil {
			_ = r.Push(token, session, f.Env.Type, f.Env.Payload)
		}
	case FramePutBack:
		if f.Env == nil {
			return
		}
		ch := r.acquire(token, session)
		ch.mu.Lock()
		ch.mailbox = append([]Envelope{*f.Env}, ch.mailbox...)
		if len(ch.mailbox) > maxMailbox {
			ch.mailbox = ch.mailbox[:maxMailbox]
		}
		ch.charge(true) // it was taken from here: given back, not new
		ch.posted()
		close(ch.mailboxWake)
		ch.mailboxWake = make(chan struct{})
		ch.mu.Unlock()
		r.release(ch)
	}
}

// Answer handles another instance's request to the relay session here:
// its state, or the next user message (waiting up to f.Wait). Only the
// home answers; elsewhere Err says so and the asker looks again.
func (r *Relay) Answer(ctx context.Context, token, session string, f Frame) Frame {
	ch := r.lookup(token, session)
	if ch == nil {
		return Frame{Err: "no relay session here"}
	}
	defer r.release(ch)
	ch.mu.Lock()
	home := ch.isHome() || (ch.host == nil && ch.everHome)
	ch.mu.Unlock()
	if !home {
		return Frame{Err: "the host is not here"}
	}
	l := &Local{ch: ch}
	switch f.Kind {
	case FrameState:
		s := l.localState()
		return Frame{State: &s}
	case FrameTake:
		d := min(time.Duration(f.Wait)*time.Millisecond, takeChunk)
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if env, ok := l.nextLocal(cctx); ok {
			return Frame{Env: &env}
		}
		return Frame{}
	}
	return Frame{Err: "unknown request " + wire.Clip(f.Kind, 32)}
}

// takeChunk bounds one take from the home: a wait for a user message is a
// series of them, so a home that dies is noticed within one.
const takeChunk = 10 * time.Second

// fromHome handles the home's envelope for this instance's agents: a
// reply to one of their calls, or a push to all of them.
func (ch *channel) fromHome(instance string, env Envelope) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.away() || ch.home() != instance {
		return // from a home this session has left
	}
	ch.activity = time.Now()
	broadcast := false
	switch env.Type {
	case wire.TypeSessionStarted:
		var p struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(env.Payload, &p)
		ch.remoteSession = p.SessionID
		broadcast = true
	case wire.TypeSnapshotState, wire.TypeToolResult:
		_, _ = ch.absorbState(env.Payload, false) // past the budget, Local.State still has the home's
	case wire.TypeStateUpdated:
		_, _ = ch.absorbState(env.Payload, true)
		broadcast = true
	case wire.TypeUserMessage:
		broadcast = true // the home keeps it in its mailbox for in-process agents
	case wire.TypeSessionEnded:
		ch.remoteSession = ""
		broadcast = true
	case wire.TypePresence:
		var p struct {
			Host bool `json:"host"`
		}
		_ = json.Unmarshal(env.Payload, &p)
		ch.homeOnline = p.Host
	}
	ch.route(env, broadcast)
}

// forwardRecord sends an event of this instance's to the home's study
// log. Called with mu held.
func (ch *channel) forwardRecord(direction string, env Envelope) {
	if !ch.away() {
		return
	}
	env = env.whole()
	_ = ch.r.o.Cluster.Send(ch.home(), ch.token, ch.name, Frame{Kind: FrameRecord, From: ch.r.o.Cluster.Instance(), Env: &env, Dir: direction})
}
