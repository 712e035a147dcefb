package ingress

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// The built-in orchestrator: the token's MCP agent runs the client's
// agent. An Ingress session is the host of a relay session (hello's
// client_meta.session, "default" when none), as an AG-UI thread is:
//
//   - agent_invoke posts the message as a user.message with its run id:
//     the agent reads it with wait_user_message;
//   - the agent's send_agent_message streams as delta;
//   - the agent waiting for the next message (it yields the turn) ends
//     the run with done;
//   - a tool the client declared in client_meta.tools is a host tool, so
//     an MCP tool of the agent; its call is a tool_request, the client's
//     tool_result its answer. A tool with requires_approval first asks
//     for an approval (approval_required, and the inbox); a rejection
//     answers the agent's call with the reason.
//
// Tools: each client tool is published under its MCP name (a '.' is a
// '_'), with its description and parameters; the agent's call carries
// the "reason" every host tool asks for, which the approval shows.

// BuiltinOptions configure the built-in orchestrator.
type BuiltinOptions struct {
	Relay  *relay.Relay
	Logger *slog.Logger
	// AgentWait is how long a run waits for an agent to take its message
	// (wait_user_message) while no agent has said anything in the run;
	// past it, with the message still unread and no agent joined on
	// /agent/ws, the run ends with orchestrator_error (state NO_AGENT
	// first), saying how to connect one; the message is kept for it
	// (default DefaultAgentWait).
	AgentWait time.Duration
}

// DefaultAgentWait is BuiltinOptions.AgentWait's default, as AG-UI's.
const DefaultAgentWait = 30 * time.Second

// toolDeadline is a tool_request's deadline_ts from now: the agent's
// call to a host tool waits that long.
const toolDeadline = 20 * time.Second

// Builtin is the built-in Orchestrator.
type Builtin struct {
	o   BuiltinOptions
	log *slog.Logger

	mu        lockorder.Mutex[lockorder.BuiltinHosts]
	hosts     map[string]*bhost // by token and relay session
	runs      map[string]*bhost // by run id
	calls     map[string]*bcall // tool calls waiting for a tool_result, by the id the client sees
	approvals map[string]*bhost // by approval id

	replies owned.Group // replies to the relay, sent off its lock; started under bhost.mu
}

// NewBuiltin returns the built-in orchestrator.
func NewBuiltin(o BuiltinOptions) *Builtin {
	opt.Logger(&o.Logger)
	opt.Default(&o.AgentWait, DefaultAgentWait)
	return &Builtin{o: o, log: o.Logger, hosts: map[string]*bhost{}, runs: map[string]*bhost{},
		calls: map[string]*bcall{}, approvals: map[string]*bhost{}}
}

// Close leaves every relay session and waits for the replies in flight.
// Idempotent.
func (b *Builtin) Close() {
	b.replies.Stop()
	b.mu.Lock()
	hs := b.hosts
	b.hosts = map[string]*bhost{}
	b.mu.Unlock()
	for _, h := range hs {
		h.Ext.Leave()
	}
	b.replies.Wait()
}

// bhost is the host of one relay session, shared by the Ingress sessions
// that name it; one run at a time.
type bhost struct {
	b     *Builtin
	token string
	name  string
	// Adapter joins it as the host and answers what every host answers
	// alike; its replies are Builtin.replies.
	relay.Adapter

	mu       lockorder.Mutex[lockorder.BuiltinHost]
	users    map[string]bool // Ingress session ids
	tools    map[string]ClientTool
	meta     ClientMeta
	user     string
	queue    []relay.Envelope
	wake     chan struct{}
	run      *brun
	last     string // how the last run ended, told to an agent that acts on it
	gone     bool   // another host took over
	studying bool   // a study session is active
	// unpublished is the relay's refusal of the client's tools (past the
	// token's budget); nil once they are published.
	unpublished error
}

// brun is the run a host has open.
type brun struct {
	id        string
	emit      func(Event)
	posted    bool              // its user.message reached the mailbox
	cancelled bool              // Cancel was called: nothing the agent sends is streamed
	over      bool              // its last event is being sent (Builtin.ended)
	end       sync.Once         // endRun's work, done once: before the last event, or when Invoke returns
	calls     map[string]string // tool calls sent to the client: their id → the agent's call (relay id)
	approvals map[string]string // approval id → the agent's call (relay id)
	pending   map[string]bpending
}

// bcall is a tool_request waiting for its tool_result. The client sees
// an id unique in this server ("tc_…"), not the relay's, which is
// counted per relay session: two sessions' calls never share an id.
type bcall struct {
	h       *bhost
	runID   string
	relayID string
}

// bpending is an agent's call waiting for its approval.
type bpending struct {
	relayID, tcID, tool string
	params              json.RawMessage
}

func newCallID() string { return "tc_" + wire.NewID()[:16] }

func relayName(info SessionInfo) string {
	if info.Meta.Session != "" {
		return info.Meta.Session
	}
	return relay.DefaultSession
}

// host returns the host of the session's relay session, joining it if
// needed.
func (b *Builtin) host(info SessionInfo) (*bhost, error) {
	k := key(info.Token, relayName(info))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.replies.Context().Err() != nil {
		return nil, errorf(wire.IngressInternalError, "the server is shutting down")
	}
	if h := b.hosts[k]; h != nil && !h.isGone() {
		return h, nil
	}
	h := &bhost{b: b, token: info.Token, name: relayName(info), wake: make(chan struct{}),
		users: map[string]bool{}, tools: map[string]ClientTool{}}
	h.Join(b.o.Relay, info.Token, h.name, relay.HostKindIngress, &b.replies, h)
	b.hosts[k] = h
	return h, nil
}

// OpenSession joins the relay session and publishes the client's tools.
func (b *Builtin) OpenSession(info SessionInfo) {
	h, err := b.host(info)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.users[info.SessionID] = true
	h.meta, h.user = info.Meta, info.UserID
	h.tools = map[string]ClientTool{}
	for _, t := range info.Meta.Tools {
		h.tools[wire.MCPName(t.Name)] = t
	}
	h.mu.Unlock()
	if err := h.publish(); err != nil {
		b.log.Warn("Ingress client's tools not published; its runs say why", "relay", h.name, "err", err)
	}
}

// CloseSession leaves the relay session once no Ingress session uses it.
func (b *Builtin) CloseSession(info SessionInfo) {
	k := key(info.Token, relayName(info))
	b.mu.Lock()
	h := b.hosts[k]
	if h == nil {
		b.mu.Unlock()
		return
	}
	h.mu.Lock()
	delete(h.users, info.SessionID)
	last := len(h.users) == 0 && h.run == nil
	h.mu.Unlock()
	if last {
		delete(b.hosts, k)
	}
	b.mu.Unlock()
	if last {
		h.Ext.Leave()
	}
}

func (h *bhost) isGone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gone
}

// publish sends the client's tools as the host's toolSchema; the relay's
// refusal is kept in unpublished, for the next run to tell the client.
func (h *bhost) publish() error {
	h.mu.Lock()
	schema := make([]map[string]any, 0, len(h.tools))
	for name, t := range h.tools {
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		desc := cmp.Or(t.Description, "A tool of the Ingress client.")
		if t.RequiresApproval {
			desc += " (The person approves each call first; say why in reason.)"
		}
		schema = append(schema, map[string]any{"name": name, "description": desc, "parameters": params})
	}
	spec := h.specLocked()
	h.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"uiSpec": spec, "toolSchema": schema})
	err := h.Ext.Send(relay.Envelope{Type: wire.TypeStateUpdated, Payload: b})
	if err != nil {
		err = fmt.Errorf("publish the client's tools: %w", err)
	}
	h.mu.Lock()
	h.unpublished = err
	h.mu.Unlock()
	return err
}

// Deliver is the relay's, called with the relay session's lock held: it
// only queues, or answers later.
func (h *bhost) Deliver(env relay.Envelope) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Lifecycle(env, func() any { return h.specLocked() }) {
		return true
	}
	switch env.Type {
	case wire.TypeSession:
		var p struct {
			Active bool `json:"active"`
		}
		_ = json.Unmarshal(env.Payload, &p)
		h.studying = p.Active
	case relay.TypeUserPosted:
		if h.run != nil {
			h.run.posted = true
		}
	case relay.TypeAgentWaiting:
		if h.run != nil && h.run.posted {
			h.pushLocked(env) // the agent yields the turn: the run's end
		}
	case wire.TypeAgentMessage:
		if !h.openLocked() {
			// The agent hears that nothing reached the client (an agent
			// on /agent/ws that sent it without an id asked for no answer).
			if env.ID != "" {
				h.ReplyLater(messageError(env.ID, h.noRunLocked()))
			}
			return true
		}
		h.pushLocked(env)
	case wire.TypeToolCall:
		if !h.openLocked() {
			h.ReplyLater(toolError(env.ID, wire.ToolExecutionFailed, h.noRunLocked()))
			return true
		}
		h.pushLocked(env)
	case wire.TypeReplaced:
		h.gone = true
		h.pushLocked(env)
	}
	return true
}

// specLocked is the host's uiSpec: the client, and the run the agent's
// messages go to ("run": its id, or "none: " and why, e.g. how the last
// one ended).
func (h *bhost) specLocked() map[string]any {
	run := "none: " + h.noRunLocked()
	if h.openLocked() {
		run = h.run.id
	}
	return map[string]any{"ingress": map[string]any{"user": h.user, "app": h.meta.App, "run": run}}
}

// openLocked reports whether a run takes what the agent sends: one is
// open, not cancelled, and not ending.
func (h *bhost) openLocked() bool {
	return h.run != nil && !h.run.cancelled && !h.run.over
}

// noRunLocked tells an agent that acts with no run open (or one
// cancelled or ending) that nothing it sends reaches the client, and why.
func (h *bhost) noRunLocked() string {
	why := "no Ingress run is open: the client has not invoked you"
	switch {
	case h.last != "":
		why = h.last
	case h.run != nil && h.run.cancelled:
		why = fmt.Sprintf("the Ingress run %s was cancelled by the client (cancel_run)", h.run.id)
	}
	return why + "; nothing you send now reaches the client. Call wait_user_message for its next message."
}

func (h *bhost) pushLocked(env relay.Envelope) {
	h.queue = append(h.queue, env)
	close(h.wake)
	h.wake = make(chan struct{})
}

// messageError answers the agent's message id: it did not reach the
// client, and why.
func messageError(id, msg string) relay.Envelope {
	b, _ := json.Marshal(relay.Error{Code: wire.ToolExecutionFailed, Message: msg})
	return relay.Envelope{Type: wire.TypeError, ReplyTo: id, Payload: b}
}

func toolError(id, code, msg string) relay.Envelope {
	b, _ := json.Marshal(map[string]any{"ok": false, "code": code, "message": msg})
	return relay.Envelope{Type: wire.TypeToolResult, ReplyTo: id, Payload: b}
}
