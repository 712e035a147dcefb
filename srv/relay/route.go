package relay

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// Routing: an agent's request goes to the host under an id of its own
// (track), the host's reply back to that agent under the agent's id
// (route), a host's push to every agent.

// call is a request forwarded to the host and not yet answered. from is
// nil once its agent has gone: the call keeps its id taken until the host
// answers it (or leaves), so the late answer reaches no one else.
type call struct {
	from   Peer
	origID string // the id the agent used; restored in the reply's replyTo
	typ    string
	at     time.Time
	// deadline tells the agent, past CallTimeout, that the host has not
	// answered (expire); nil for an in-process agent, whose caller has a
	// deadline of its own, and for agent.message, which has no answer.
	deadline *time.Timer
}

// stop ends c's deadline once c has left inflight.
func (c *call) stop() {
	if c.deadline != nil {
		c.deadline.Stop()
	}
}

// expire tells the agent of the call id, if it is still waiting, that the
// host did not answer in time. The call stays in flight without its
// agent, as one whose agent has gone: its id stays taken until the host
// answers or leaves, so a late answer reaches no one else.
func (ch *channel) expire(id string, c *call) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.inflight[id] != c || c.from == nil {
		return // answered, failed or disowned meanwhile
	}
	ch.fail(c.from, c.origID, errorf(wire.ToolExecutionFailed, "the host did not answer this %s within %s; the action may or may not have happened",
		c.typ, ch.r.o.CallTimeout))
	c.from = nil
}

func (ch *channel) fromAgent(p Peer, env Envelope) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.activity = time.Now()
	switch env.Type {
	case wire.TypeSessionStart, wire.TypeSnapshotGet, wire.TypeToolCall, wire.TypeAgentMessage, wire.TypeSessionEnd:
	case wire.TypeJoin:
		ch.fail(p, env.ID, errorf(wire.InvalidMessage, "already joined"))
		return
	default:
		ch.fail(p, env.ID, errorf(wire.InvalidMessage, "unknown message type %q for an agent", wire.Clip(env.Type, 64)))
		return
	}
	if e := checkAgentPayload(env); e != nil {
		ch.fail(p, env.ID, e)
		return
	}
	// An instance's agents reach only a host here (cluster.go): a home
	// that moved on does not pass them along.
	if ch.host == nil || (p.instance() != "" && ch.away()) {
		ch.fail(p, env.ID, errorf(wire.NoActiveSpec, "no UI is connected to relay session %[1]q: open the booking page "+
			"(/booking?token=…&session=%[1]s), an AG-UI frontend on thread %[1]q, or an Ingress client on session %[1]q, with this token", ch.name))
		return
	}
	// With the host on another instance, the study session is the home's:
	// it checks and logs what follows.
	switch env.Type {
	case wire.TypeSessionStart:
		if ch.away() {
			break
		}
		if ch.log != nil {
			ch.fail(p, env.ID, errorf(wire.InvalidMessage, "session %s is already active: end it first", ch.log.ID()))
			return
		}
		if ch.openSession(p, env.ID) != nil {
			return
		}
		env.Payload = setFields(env.Payload, map[string]any{"sessionId": ch.log.ID()})
	case wire.TypeToolCall, wire.TypeAgentMessage, wire.TypeSessionEnd:
		if ch.log == nil && !ch.away() {
			ch.fail(p, env.ID, errorf(wire.SessionNotActive, "no study session is active in relay session %q: send session.start first", ch.name))
			return
		}
	}
	hostID, ok := ch.track(p, env)
	if !ok {
		ch.fail(p, env.ID, errorf(wire.ToolExecutionFailed, "too many requests waiting for the host"))
		return
	}
	origID, session := env.ID, ""
	if ch.log != nil {
		session = ch.log.ID()
	}
	env.ID = hostID
	if !ch.record(studylog.In, env) { // the study session has ended: this needed it
		ch.untrack(hostID)
		ch.fail(p, origID, ch.logFull(env.Type, session))
		return
	}
	if !ch.host.deliver(env, nil) {
		ch.untrack(hostID)
		ch.fail(p, origID, errorf(wire.InvalidMessage, "%s not delivered: the host of relay session %q has as much waiting for it as it may "+
			"(its send queue is full: it reads slowly, or an AG-UI frontend has no run open to take it), so nothing of it reached the host; "+
			"send it again once the host has caught up", env.Type, ch.name))
		return
	}
}

// untrack forgets the call id the host was not sent after all.
func (ch *channel) untrack(id string) {
	if c := ch.inflight[id]; c != nil {
		delete(ch.inflight, id)
		c.stop()
	}
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
// in flight, one whose agent has gone and whose answer may still come, or
// one forgotten while this host may still answer it).
//
// Once many calls are in flight, those older than two minutes are
// forgotten: their agents are told, and their names are retired, not
// freed, until the host answers them or leaves (failInflight), so a late
// answer can never be taken for a new call's. Retired names are bounded
// too: past maxInflight of them, old calls stay in flight and new ones are
// refused.
func (ch *channel) track(p Peer, env Envelope) (string, bool) {
	if env.ID == "" && !p.inProcess() && env.Type == wire.TypeAgentMessage {
		return "", true // fire-and-forget; nothing to route back
	}
	if len(ch.inflight) >= maxInflight/4 {
		cut := time.Now().Add(-2 * time.Minute)
		for id, c := range ch.inflight {
			if c.at.Before(cut) && len(ch.retired) < maxInflight {
				delete(ch.inflight, id)
				c.stop()
				ch.retired[id] = struct{}{}
				if c.from != nil {
					ch.fail(c.from, c.origID, errorf(wire.ToolExecutionFailed, "the host did not answer within two minutes; the action may or may not have happened"))
				}
			}
		}
	}
	if len(ch.inflight) >= maxInflight {
		return "", false
	}
	// A new name is checked too: an agent may already use it for a call
	// of its own ("x~1"), and two calls of one name would mix up replies.
	// At most len(inflight)+len(retired)+1 names are tried.
	id := env.ID
	for id == "" || ch.taken(id) {
		ch.seq++
		id = "relay-" + strconv.FormatUint(ch.seq, 10)
		if env.ID != "" {
			id = env.ID + "~" + strconv.FormatUint(ch.seq, 10)
		}
	}
	c := &call{from: p, origID: env.ID, typ: env.Type, at: time.Now()}
	if !p.inProcess() && env.Type != wire.TypeAgentMessage {
		c.deadline = time.AfterFunc(ch.r.o.CallTimeout, func() { ch.expire(id, c) })
	}
	ch.inflight[id] = c
	return id, true
}

func (ch *channel) taken(id string) bool {
	_, busy := ch.inflight[id]
	_, retired := ch.retired[id]
	return busy || retired
}

// answers is the host's answer to each request it is sent, besides an
// error (agent.message has none but that).
var answers = map[string]string{
	wire.TypeToolCall:     wire.TypeToolResult,
	wire.TypeSnapshotGet:  wire.TypeSnapshotState,
	wire.TypeSessionStart: wire.TypeSessionStarted,
	wire.TypeSessionEnd:   wire.TypeSessionEnded,
}

// fromHost handles a host's message. It returns what the host was told
// went wrong (External.Send hands it to an in-process host), nil when all
// was taken.
func (ch *channel) fromHost(p Peer, env Envelope) *Error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.activity = time.Now()
	if p != ch.host {
		return nil // replaced; its connection is closing
	}
	switch env.Type {
	case wire.TypeSessionStarted, wire.TypeSnapshotState, wire.TypeToolResult, wire.TypeStateUpdated,
		wire.TypeUserMessage, wire.TypeSessionEnded, wire.TypeError:
	default:
		e := errorf(wire.InvalidMessage, "unknown message type %q for a host", wire.Clip(env.Type, 64))
		ch.fail(p, env.ID, e)
		return e
	}
	env.Payload = stripBackendData(env.Payload)
	if (env.Type == wire.TypeToolResult || env.Type == wire.TypeSnapshotState) && (env.ReplyTo == "" || !ch.taken(env.ReplyTo)) {
		// An answer to nothing: said so, rather than dropped unseen (or,
		// without a replyTo, pushed to every agent as if it were news).
		e := errorf(wire.InvalidMessage, "%s replyTo %q names no request sent to this host that waits for its answer "+
			"(answered already, or never sent): reply with the id of the request", env.Type, wire.Clip(env.ReplyTo, 64))
		ch.fail(p, env.ID, e)
		return e
	}
	if c := ch.inflight[env.ReplyTo]; c != nil && env.Type != wire.TypeError && env.Type != answers[c.typ] {
		// Not this request's answer: the agent would take it for one (a
		// tool call "ok" that the host never said), so it goes nowhere
		// and the request still waits.
		e := errorf(wire.InvalidMessage, "%s does not answer the %s %q: answer it with %s", env.Type, c.typ,
			wire.Clip(env.ReplyTo, 64), strings.TrimPrefix(answers[c.typ]+" or error", " or "))
		ch.fail(p, env.ID, e)
		return e
	}
	broadcast := false
	var refused *Error // told the host; for a reply, its answer goes on
	switch env.Type {
	case wire.TypeSessionStarted:
		if ch.log == nil { // started from the host's own UI
			if e := ch.openSession(p, env.ID); e != nil {
				return e
			}
		}
		env.Payload = setFields(env.Payload, map[string]any{"sessionId": ch.log.ID()})
		broadcast = true
	case wire.TypeSnapshotState, wire.TypeToolResult:
		// The answer goes to its agent even when its state is not kept.
		var unlisted *Error
		if unlisted, refused = ch.absorbState(env.Payload, false); refused != nil {
			ch.fail(p, env.ID, refused)
		} else if unlisted != nil {
			ch.fail(p, env.ID, unlisted)
		}
		if env.Type == wire.TypeSnapshotState && ch.log != nil {
			env.Payload = setFields(env.Payload, map[string]any{"sessionId": ch.log.ID()})
		}
	case wire.TypeStateUpdated:
		// Not kept, not sent: the agents' state and the relay's stay one.
		unlisted, e := ch.absorbState(env.Payload, true)
		if e != nil {
			ch.fail(p, env.ID, e)
			return e
		}
		if unlisted != nil { // kept and sent on all the same
			ch.fail(p, env.ID, unlisted)
		}
		broadcast = true
	case wire.TypeUserMessage:
		// Refused rather than lost: the host is told it did not go.
		if e := ch.post(env); e != nil {
			ch.fail(p, env.ID, e)
			return e
		}
		broadcast = true
	case wire.TypeSessionEnded:
		if ch.log != nil {
			env.Payload = setFields(env.Payload, map[string]any{
				"sessionId": ch.log.ID(), "logFile": ch.log.RelPath(), "stateReset": true,
			})
		}
		broadcast = true
	}
	session := ""
	if ch.log != nil {
		session = ch.log.ID()
	}
	if !ch.record(studylog.Out, env) {
		// The study session has ended (its agents were told): what needs
		// it is refused, the rest goes on as outside one.
		switch env.Type {
		case wire.TypeSessionStarted:
			e := ch.logFull(env.Type, session)
			ch.fail(p, env.ID, e)
			if c := ch.inflight[env.ReplyTo]; c != nil {
				ch.untrack(env.ReplyTo)
				if c.from != nil {
					ch.fail(c.from, c.origID, e)
				}
			}
			return e
		case wire.TypeSessionEnded:
			broadcast = false // said already, to every agent
		}
	}
	if c := ch.inflight[env.ReplyTo]; env.Type == wire.TypeError && c != nil && c.typ == wire.TypeSessionStart {
		ch.closeSession() // the host refused to start it
	}
	if env.Type == wire.TypeSessionEnded {
		ch.closeSession()
	}
	ch.route(env, broadcast)
	return refused
}

// unreadable handles a frame from the host p that Parse refused (why):
// the host is told. A frame that is JSON (a key given twice, a field
// missing) is one the host can send again, put right, and the call it
// names waits for that. One that is not (not UTF-8, not JSON) comes from
// a host whose encoder is broken: the call in flight it names in
// replyTo, as far as that can be read, fails now, rather than waiting
// out its deadline as if the host had said nothing.
func (ch *channel) unreadable(p Peer, data []byte, id string, why *Error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.fail(p, id, why)
	if p != ch.host || (utf8.Valid(data) && json.Valid(data)) {
		return
	}
	replyTo := readReplyTo(data)
	c := ch.inflight[replyTo]
	if c == nil {
		return
	}
	ch.untrack(replyTo)
	if c.from != nil {
		ch.fail(c.from, c.origID, errorf(wire.ToolExecutionFailed, "the host's answer to this %s could not be read (%s); "+
			"the action may or may not have happened", c.typ, why.Message))
	}
}

// replyToField finds a replyTo in a frame that is not JSON.
var replyToField = regexp.MustCompile(`"replyTo"\s*:\s*"([^"\\]{1,256})"`)

// readReplyTo is the replyTo of a frame Parse refused, "" when none can
// be read: JSON's, where the frame is JSON (its strings not UTF-8 are
// read as U+FFFD), else the first that looks like one.
func readReplyTo(data []byte) string {
	var v struct {
		ReplyTo string `json:"replyTo"`
	}
	if json.Unmarshal(data, &v) == nil {
		return v.ReplyTo
	}
	if m := replyToField.FindSubmatch(data); m != nil {
		return string(m[1])
	}
	return ""
}

// route sends a host message to the agent whose request it answers, and
// pushes to every agent. A reply is never anyone else's: one to a call
// whose agent has gone, or to no call at all, goes nowhere unless it is
// also an event everyone sees (session.started, state.updated, ...).
func (ch *channel) route(env Envelope, broadcast bool) {
	var to Peer
	if env.ReplyTo == "" {
		broadcast = true
	} else if c := ch.inflight[env.ReplyTo]; c != nil {
		delete(ch.inflight, env.ReplyTo)
		c.stop()
		if to = c.from; to != nil {
			reply := env
			reply.ReplyTo = c.origID
			to.deliver(reply, nil)
		}
	} else if _, ok := ch.retired[env.ReplyTo]; ok {
		delete(ch.retired, env.ReplyTo) // answered at last: the name is free
	} else if !broadcast {
		ch.r.log.Debug("host reply to no call in flight dropped", "relay", ch.name, "type", env.Type)
	}
	if broadcast {
		push := env
		push.ReplyTo = ""
		ch.toAgents(push, to)
	}
}

// forget disowns p's requests in flight; their answers go nowhere, and
// their ids stay taken until the host answers (see call).
func (ch *channel) forget(p Peer) {
	for _, c := range ch.inflight {
		if c.from == p {
			c.from = nil
		}
	}
}

func (ch *channel) failInflight(msg string) {
	clear(ch.retired) // the host that could answer them has gone
	for id, c := range ch.inflight {
		delete(ch.inflight, id)
		c.stop()
		if c.from != nil {
			ch.fail(c.from, c.origID, errorf(wire.ToolExecutionFailed, "%s", msg))
		}
	}
}
