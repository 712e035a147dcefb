package relay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// peer is one side of a relay session: a WebSocket host or agent, or an
// in-process agent call (local) made for the MCP bridge.
type peer struct {
	role  string // "host" or "agent"
	id    string
	conn  *wsconn.Conn
	local chan Reply // in-process: receives the reply
}

// Reply is what an in-process request gets back: the envelope, and the
// state version when it was routed, so a caller can wait for the
// state.updated that follows it (and not take an earlier one).
type Reply struct {
	Envelope
	StateVersion uint64
}

func (p *peer) deliver(env Envelope) bool { return p.deliverAt(env, 0) }

func (p *peer) deliverAt(env Envelope, version uint64) bool {
	if p.conn != nil {
		return p.conn.Send(encode(env))
	}
	select {
	case p.local <- Reply{Envelope: env, StateVersion: version}:
		return true
	default:
		return false
	}
}

// call is a request forwarded to the host and not yet answered. from is
// nil once its agent has gone: the call keeps its id taken until the host
// answers it (or leaves), so the late answer reaches no one else.
type call struct {
	from   *peer
	origID string // the id the agent used; restored in the reply's replyTo
	typ    string
	at     time.Time
}

const (
	maxInflight = 1024
	maxMailbox  = 256
	maxAgents   = 64 // per relay session
)

// channel is one relay session: everything under one (token, sessionId).
// It is freed when it holds nothing (sessions.go).
type channel struct {
	r     *Relay
	token string
	name  string
	key   string // in Relay.channels
	refs  int    // callers using it now; guarded by Relay.mu

	mu       sync.Mutex
	host     *peer
	agents   map[*peer]struct{}
	log      *studylog.Log // the active study session, nil when none
	inflight map[string]*call
	seq      uint64

	// The host's visible state as last published (backendData stripped).
	uiSpec, messageHistory, toolSchema json.RawMessage
	stateVersion                       uint64
	stateWake                          chan struct{} // closed on every state.updated
	tools                              []json.RawMessage
	toolIndex                          map[string]int

	mailbox     []Envelope // user.message for in-process agents
	mailboxWake chan struct{}
	activity    time.Time   // the last message through the relay session
	hostGone    *time.Timer // armed while the host is away: see leave
	hostLeft    uint64      // counts the host's departures; names hostGone's round
}

func newChannel(r *Relay, token, name string) *channel {
	return &channel{
		r: r, token: token, name: name,
		agents:      make(map[*peer]struct{}),
		inflight:    make(map[string]*call),
		toolIndex:   make(map[string]int),
		stateWake:   make(chan struct{}),
		mailboxWake: make(chan struct{}),
	}
}

// record appends an event to the active session's log. Called with mu
// held, before the event is forwarded, so what was relayed is on disk.
func (ch *channel) record(direction string, env Envelope) {
	if ch.log == nil {
		return
	}
	if err := ch.log.Append(ch.r.now(), direction, env.Type, env.ID, env.ReplyTo, env.Payload); err != nil {
		ch.r.log.Error("study log", "session", ch.log.ID(), "err", err)
	}
}

// fail answers env's sender with a protocol error.
func (ch *channel) fail(to *peer, replyTo string, e *Error) {
	env := Envelope{Type: wire.TypeError, ReplyTo: replyTo, Payload: mustJSON(e)}
	ch.record(studylog.Internal, env)
	to.deliver(env)
}

func (ch *channel) fromAgent(p *peer, env Envelope) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.activity = ch.r.now()
	switch env.Type {
	case wire.TypeSessionStart, wire.TypeSnapshotGet, wire.TypeToolCall, wire.TypeAgentMessage, wire.TypeSessionEnd:
	case wire.TypeJoin:
		ch.fail(p, env.ID, errorf(wire.InvalidMessage, "already joined"))
		return
	default:
		ch.fail(p, env.ID, errorf(wire.InvalidMessage, "unknown message type %q for an agent", truncate(env.Type, 64)))
		return
	}
	if e := checkAgentPayload(env); e != nil {
		ch.fail(p, env.ID, e)
		return
	}
	if ch.host == nil {
		ch.fail(p, env.ID, errorf(wire.NoActiveSpec, "no host has joined relay session %q: open the booking UI with this token", ch.name))
		return
	}
	switch env.Type {
	case wire.TypeSessionStart:
		if ch.log != nil {
			ch.fail(p, env.ID, errorf(wire.InvalidMessage, "session %s is already active: end it first", ch.log.ID()))
			return
		}
		if !ch.openSession(p, env.ID) {
			return
		}
		env.Payload = setFields(env.Payload, map[string]any{"sessionId": ch.log.ID()})
	case wire.TypeToolCall, wire.TypeAgentMessage, wire.TypeSessionEnd:
		if ch.log == nil {
			ch.fail(p, env.ID, errorf(wire.SessionNotActive, "no study session is active in relay session %q: send session.start first", ch.name))
			return
		}
	}
	hostID, ok := ch.track(p, env)
	if !ok {
		ch.fail(p, env.ID, errorf(wire.ToolExecutionFailed, "too many requests waiting for the host"))
		return
	}
	env.ID = hostID
	ch.record(studylog.In, env)
	ch.host.deliver(env)
}

// checkAgentPayload validates what the relay can check before the host.
func checkAgentPayload(env Envelope) *Error {
	switch env.Type {
	case wire.TypeToolCall:
		var p struct {
			ToolName json.RawMessage `json:"toolName"`
			Params   json.RawMessage `json:"params"`
			Reason   json.RawMessage `json:"reason"`
		}
		_ = json.Unmarshal(env.Payload, &p)
		var name, reason string
		if json.Unmarshal(p.ToolName, &name) != nil || strings.TrimSpace(name) == "" {
			return errorf(wire.InvalidParams, "tool.call needs payload.toolName (a non-empty string)")
		}
		if json.Unmarshal(p.Reason, &reason) != nil || strings.TrimSpace(reason) == "" {
			return errorf(wire.InvalidParams, "tool.call needs payload.reason: say why you take this action")
		}
		if ps := strings.TrimSpace(string(p.Params)); ps != "" && ps != "null" && ps[0] != '{' {
			return errorf(wire.InvalidParams, "tool.call payload.params must be an object")
		}
	case wire.TypeAgentMessage:
		var p struct {
			Text json.RawMessage `json:"text"`
		}
		_ = json.Unmarshal(env.Payload, &p)
		var text string
		if json.Unmarshal(p.Text, &text) != nil || strings.TrimSpace(text) == "" {
			return errorf(wire.InvalidParams, "agent.message needs payload.text (a non-empty string)")
		}
	}
	return nil
}

// track registers a request to the host and returns the id to send it
// under: the agent's own id unless another call to the host uses it (one
// in flight, or one whose agent has gone and whose answer may still come).
func (ch *channel) track(p *peer, env Envelope) (string, bool) {
	if env.ID == "" && p.local == nil && env.Type == wire.TypeAgentMessage {
		return "", true // fire-and-forget; nothing to route back
	}
	if len(ch.inflight) >= maxInflight/4 {
		cut := ch.r.now().Add(-2 * time.Minute)
		for id, c := range ch.inflight {
			if c.at.Before(cut) {
				delete(ch.inflight, id)
			}
		}
	}
	if len(ch.inflight) >= maxInflight {
		return "", false
	}
	// A new name is checked too: an agent may already use it for a call
	// of its own ("x~1"), and two calls of one name would mix up replies.
	// At most len(inflight)+1 names are tried.
	id := env.ID
	for _, busy := ch.inflight[id]; id == "" || busy; _, busy = ch.inflight[id] {
		ch.seq++
		id = "relay-" + strconv.FormatUint(ch.seq, 10)
		if env.ID != "" {
			id = env.ID + "~" + strconv.FormatUint(ch.seq, 10)
		}
	}
	ch.inflight[id] = &call{from: p, origID: env.ID, typ: env.Type, at: ch.r.now()}
	return id, true
}

func (ch *channel) openSession(p *peer, replyTo string) bool {
	if ch.r.o.Logs == nil {
		ch.fail(p, replyTo, errorf(wire.ToolExecutionFailed, "study logs are not configured on this server"))
		return false
	}
	l, err := ch.r.o.Logs.Create(ch.r.now())
	if err != nil {
		ch.r.log.Error("open study log", "err", err)
		ch.fail(p, replyTo, errorf(wire.ToolExecutionFailed, "cannot open the study log"))
		return false
	}
	ch.log = l
	ch.r.log.Info("study session started", "session", l.ID(), "relay", ch.name)
	ch.tellHost()
	return true
}

// tellHost lets the host show the study session, however it was started.
func (ch *channel) tellHost() {
	if ch.host == nil {
		return
	}
	p := map[string]any{"active": ch.log != nil, "sessionId": ""}
	if ch.log != nil {
		p["sessionId"] = ch.log.ID()
	}
	ch.host.deliver(Envelope{Type: wire.TypeSession, Payload: mustJSON(p)})
}

func (ch *channel) closeSession() {
	if ch.log == nil {
		return
	}
	if err := ch.log.Close(); err != nil {
		ch.r.log.Error("close study log", "session", ch.log.ID(), "err", err)
	}
	ch.r.log.Info("study session ended", "session", ch.log.ID(), "relay", ch.name)
	ch.log = nil
	ch.tellHost()
}

func (ch *channel) fromHost(p *peer, env Envelope) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.activity = ch.r.now()
	if p != ch.host {
		return // replaced; its connection is closing
	}
	switch env.Type {
	case wire.TypeSessionStarted, wire.TypeSnapshotState, wire.TypeToolResult, wire.TypeStateUpdated,
		wire.TypeUserMessage, wire.TypeSessionEnded, wire.TypeError:
	default:
		ch.fail(p, env.ID, errorf(wire.InvalidMessage, "unknown message type %q for a host", truncate(env.Type, 64)))
		return
	}
	env.Payload = stripBackendData(env.Payload)
	broadcast := false
	switch env.Type {
	case wire.TypeSessionStarted:
		if ch.log == nil && !ch.openSession(p, env.ID) { // started from the host's own UI
			return
		}
		env.Payload = setFields(env.Payload, map[string]any{"sessionId": ch.log.ID()})
		broadcast = true
	case wire.TypeSnapshotState:
		ch.absorbState(env.Payload, false)
		if ch.log != nil {
			env.Payload = setFields(env.Payload, map[string]any{"sessionId": ch.log.ID()})
		}
	case wire.TypeToolResult:
		ch.absorbState(env.Payload, false)
	case wire.TypeStateUpdated:
		ch.absorbState(env.Payload, true)
		broadcast = true
	case wire.TypeUserMessage:
		ch.post(env)
		broadcast = true
	case wire.TypeSessionEnded:
		if ch.log != nil {
			env.Payload = setFields(env.Payload, map[string]any{
				"sessionId": ch.log.ID(), "logFile": ch.log.RelPath(), "stateReset": true,
			})
		}
		broadcast = true
	}
	ch.record(studylog.Out, env)
	if c := ch.inflight[env.ReplyTo]; env.Type == wire.TypeError && c != nil && c.typ == wire.TypeSessionStart {
		ch.closeSession() // the host refused to start it
	}
	if env.Type == wire.TypeSessionEnded {
		ch.closeSession()
	}
	ch.route(env, broadcast)
}

// route sends a host message to the agent whose request it answers, and
// pushes to every agent. A reply is never anyone else's: one to a call
// whose agent has gone, or to no call at all, goes nowhere unless it is
// also an event everyone sees (session.started, state.updated, ...).
func (ch *channel) route(env Envelope, broadcast bool) {
	var to *peer
	if env.ReplyTo == "" {
		broadcast = true
	} else if c := ch.inflight[env.ReplyTo]; c != nil {
		delete(ch.inflight, env.ReplyTo)
		if to = c.from; to != nil {
			reply := env
			reply.ReplyTo = c.origID
			to.deliverAt(reply, ch.stateVersion)
		}
	} else if !broadcast {
		ch.r.log.Debug("host reply to no call in flight dropped", "relay", ch.name, "type", env.Type)
	}
	if broadcast {
		push := env
		push.ReplyTo = ""
		for a := range ch.agents {
			if a != to {
				a.deliver(push)
			}
		}
	}
}

// absorbState keeps the host's latest published state. state.updated is
// authoritative (it bumps the version waiters watch); snapshots and tool
// results refresh what they carry.
func (ch *channel) absorbState(payload json.RawMessage, authoritative bool) {
	var p struct {
		UISpec         json.RawMessage `json:"uiSpec"`
		MessageHistory json.RawMessage `json:"messageHistory"`
		ToolSchema     json.RawMessage `json:"toolSchema"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return
	}
	if len(p.UISpec) > 0 && string(p.UISpec) != "null" {
		ch.uiSpec = p.UISpec
	}
	if len(p.MessageHistory) > 0 && string(p.MessageHistory) != "null" {
		ch.messageHistory = p.MessageHistory
	}
	if len(p.ToolSchema) > 0 && string(p.ToolSchema) != "null" {
		ch.toolSchema = p.ToolSchema
		ch.learnTools(p.ToolSchema)
	}
	if authoritative {
		ch.stateVersion++
		close(ch.stateWake)
		ch.stateWake = make(chan struct{})
	}
}

// learnTools adds the tools of a stage-filtered toolSchema to the set of
// every tool the host has declared, which is what the MCP bridge exposes.
func (ch *channel) learnTools(schema json.RawMessage) {
	var entries []json.RawMessage
	if json.Unmarshal(schema, &entries) != nil {
		return
	}
	for _, e := range entries {
		name := wire.ParseTool(e).Name
		if name == "" {
			continue
		}
		if i, ok := ch.toolIndex[name]; ok {
			ch.tools[i] = e
			continue
		}
		if len(ch.tools) >= 256 {
			return
		}
		ch.toolIndex[name] = len(ch.tools)
		ch.tools = append(ch.tools, e)
	}
}

func (ch *channel) post(env Envelope) {
	if len(ch.mailbox) >= maxMailbox {
		ch.r.log.Warn("user message mailbox full, dropping the oldest", "relay", ch.name)
		ch.mailbox = ch.mailbox[1:]
	}
	ch.mailbox = append(ch.mailbox, env)
	close(ch.mailboxWake)
	ch.mailboxWake = make(chan struct{})
}

// joinHost makes p the host and acknowledges its relay.join (joinID).
// Registration and acknowledgement happen under one lock: whatever the
// peer, or anyone it tells, does after relay.joined finds it in place, and
// nothing reaches it before relay.joined.
func (ch *channel) joinHost(p *peer, joinID string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if old := ch.host; old != nil {
		old.deliver(Envelope{Type: wire.TypeReplaced, Payload: mustJSON(map[string]any{
			"reason": "a newer host joined this relay session",
		})})
		if old.conn != nil {
			old.conn.Shutdown(4001, "replaced by a newer host")
		}
		ch.failInflight("the host was replaced by a newer one before answering; the action may or may not have happened")
		ch.record(studylog.Internal, Envelope{Type: "relay.host.replaced", Payload: json.RawMessage("{}")})
	}
	ch.host = p
	if ch.hostGone != nil {
		ch.hostGone.Stop() // came back in time: the session goes on
		ch.hostGone = nil
	}
	p.deliver(Envelope{Type: wire.TypeJoined, ReplyTo: joinID, Payload: ch.joinedPayloadLocked("host")})
	ch.record(studylog.Internal, Envelope{Type: "relay.host.joined", Payload: json.RawMessage("{}")})
	ch.presence()
}

// joinAgent adds p to the agents and acknowledges, as joinHost does.
func (ch *channel) joinAgent(p *peer, joinID string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.agents) >= maxAgents {
		p.deliver(Envelope{Type: wire.TypeError, ReplyTo: joinID, Payload: mustJSON(errorf(wire.InvalidMessage, "relay session %q has %d agents already", ch.name, maxAgents))})
		return false
	}
	ch.agents[p] = struct{}{}
	p.deliver(Envelope{Type: wire.TypeJoined, ReplyTo: joinID, Payload: ch.joinedPayloadLocked("agent")})
	return true
}

// remove takes p out of the relay session; a host leaving starts the
// grace within which it may come back.
func (ch *channel) remove(p *peer) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if p.role == "host" {
		if ch.host != p {
			return
		}
		ch.host = nil
		ch.failInflight("the host disconnected before answering; the action may or may not have happened")
		ch.record(studylog.Internal, Envelope{Type: "relay.host.left", Payload: json.RawMessage("{}")})
		ch.presence()
		// For the grace the host may come back (a reload): the study
		// session goes on and the last state stays for the agents.
		ch.hostLeft++
		round := ch.hostLeft
		ch.hostGone = time.AfterFunc(ch.r.o.HostGrace, func() { ch.endForLostHost(round) })
		return
	}
	delete(ch.agents, p)
	ch.forget(p)
}

// leave removes p and frees the relay session if that left it empty.
func (ch *channel) leave(p *peer) {
	ch.remove(p)
	ch.r.tidy(ch)
}

// endForLostHost ends the grace of the host's departure number round:
// the active study session, if any, ends (its log is closed and the
// agents are told), and the relay session is freed if it holds nothing.
func (ch *channel) endForLostHost(round uint64) {
	ch.mu.Lock()
	if round != ch.hostLeft || ch.hostGone == nil {
		ch.mu.Unlock()
		return // the host came back, maybe to leave again
	}
	ch.hostGone = nil
	if ch.host == nil && ch.log != nil {
		env := Envelope{Type: wire.TypeSessionEnded, Payload: mustJSON(map[string]any{
			"sessionId": ch.log.ID(), "logFile": ch.log.RelPath(), "stateReset": true, "reason": "host_gone",
		})}
		ch.record(studylog.Internal, env)
		ch.closeSession()
		for a := range ch.agents {
			a.deliver(env)
		}
	}
	ch.mu.Unlock()
	ch.r.tidy(ch)
}

// forget disowns p's requests in flight; their answers go nowhere, and
// their ids stay taken until the host answers (see call).
func (ch *channel) forget(p *peer) {
	for _, c := range ch.inflight {
		if c.from == p {
			c.from = nil
		}
	}
}

func (ch *channel) failInflight(msg string) {
	for id, c := range ch.inflight {
		delete(ch.inflight, id)
		if c.from != nil {
			ch.fail(c.from, c.origID, errorf(wire.ToolExecutionFailed, "%s", msg))
		}
	}
}

func (ch *channel) presence() {
	env := Envelope{Type: wire.TypePresence, Payload: mustJSON(map[string]any{"host": ch.host != nil})}
	for a := range ch.agents {
		a.deliver(env)
	}
}

// joinedPayload describes the relay session to a peer that just joined.
func (ch *channel) joinedPayloadLocked(role string) json.RawMessage {
	m := map[string]any{"role": role, "sessionId": ch.name, "hostOnline": ch.host != nil}
	if ch.log != nil {
		m["activeSession"] = ch.log.ID()
	}
	return mustJSON(m)
}

func (ch *channel) String() string { return fmt.Sprintf("relay session %q", ch.name) }
