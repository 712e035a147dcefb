package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
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
	// ToolDeadline is a tool_request's deadline_ts from now (default
	// 20s: the agent's call to a host tool waits that long).
	ToolDeadline time.Duration
	Now          func() time.Time
}

// Builtin is the built-in Orchestrator.
type Builtin struct {
	o   BuiltinOptions
	log *slog.Logger

	mu        lockorder.Mutex[lockorder.BuiltinHosts]
	hosts     map[string]*bhost // by token and relay session
	runs      map[string]*bhost // by run id
	calls     map[string]*bcall // tool calls waiting for a tool_result, by the id the client sees
	approvals map[string]*bhost // by approval id

	gmu    lockorder.Mutex[lockorder.BuiltinReplies] // after bhost.mu: replyLater runs under it
	closed bool
	wg     sync.WaitGroup // replies to the relay, sent off its lock
}

// NewBuiltin returns the built-in orchestrator.
func NewBuiltin(o BuiltinOptions) *Builtin {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ToolDeadline <= 0 {
		o.ToolDeadline = 20 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Builtin{o: o, log: o.Logger, hosts: map[string]*bhost{}, runs: map[string]*bhost{},
		calls: map[string]*bcall{}, approvals: map[string]*bhost{}}
}

// Close leaves every relay session and waits for the replies in flight.
// Idempotent.
func (b *Builtin) Close() {
	b.gmu.Lock()
	b.closed = true
	b.gmu.Unlock()
	b.mu.Lock()
	hs := b.hosts
	b.hosts = map[string]*bhost{}
	b.mu.Unlock()
	for _, h := range hs {
		h.ext.Leave()
	}
	b.wg.Wait()
}

// bhost is the host of one relay session, shared by the Ingress sessions
// that name it; one run at a time.
type bhost struct {
	b     *Builtin
	token string
	name  string
	ext   *relay.External // set before ready is closed
	ready chan struct{}

	mu       lockorder.Mutex[lockorder.BuiltinHost]
	users    map[string]bool // Ingress session ids
	tools    map[string]ClientTool
	meta     ClientMeta
	user     string
	queue    []relay.Envelope
	wake     chan struct{}
	run      *brun
	gone     bool // another host took over
	studying bool // a study session is active
}

// brun is the run a host has open.
type brun struct {
	id        string
	emit      func(Event)
	posted    bool              // its user.message reached the mailbox
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
	b.gmu.Lock()
	closed := b.closed
	b.gmu.Unlock()
	if closed {
		return nil, errorf(wire.IngressInternalError, "the server is shutting down")
	}
	if h := b.hosts[k]; h != nil && !h.isGone() {
		return h, nil
	}
	h := &bhost{b: b, token: info.Token, name: relayName(info), ready: make(chan struct{}), wake: make(chan struct{}),
		users: map[string]bool{}, tools: map[string]ClientTool{}}
	h.ext = b.o.Relay.JoinHost(info.Token, h.name, h)
	close(h.ready)
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
		h.tools[mcpName(t.Name)] = t
	}
	h.mu.Unlock()
	h.publish()
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
		h.ext.Leave()
	}
}

func (h *bhost) isGone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gone
}

// publish sends the client's tools as the host's toolSchema.
func (h *bhost) publish() {
	h.mu.Lock()
	schema := make([]map[string]any, 0, len(h.tools))
	for name, t := range h.tools {
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		desc := t.Description
		if desc == "" {
			desc = "A tool of the Ingress client."
		}
		if t.RequiresApproval {
			desc += " (The person approves each call first; say why in reason.)"
		}
		schema = append(schema, map[string]any{"name": name, "description": desc, "parameters": params})
	}
	spec := map[string]any{"ingress": map[string]any{"user": h.user, "app": h.meta.App}}
	h.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"uiSpec": spec, "toolSchema": schema})
	h.ext.Send(relay.Envelope{Type: wire.TypeStateUpdated, Payload: b})
}

// Deliver is the relay's, called with the relay session's lock held: it
// only queues, or answers later.
func (h *bhost) Deliver(env relay.Envelope) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch env.Type {
	case wire.TypeSessionStart:
		h.replyLater(relay.Envelope{Type: wire.TypeSessionStarted, ReplyTo: env.ID, Payload: json.RawMessage("{}")})
	case wire.TypeSessionEnd:
		h.replyLater(relay.Envelope{Type: wire.TypeSessionEnded, ReplyTo: env.ID, Payload: env.Payload})
	case wire.TypeSnapshotGet:
		b, _ := json.Marshal(map[string]any{"uiSpec": map[string]any{"ingress": map[string]any{"user": h.user, "app": h.meta.App}}})
		h.replyLater(relay.Envelope{Type: wire.TypeSnapshotState, ReplyTo: env.ID, Payload: b})
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
		if h.run != nil {
			h.pushLocked(env)
		}
	case wire.TypeToolCall:
		if h.run == nil {
			h.replyLater(toolError(env.ID, wire.ToolExecutionFailed, "no Ingress run is open: the client has not invoked you; wait_user_message for its next message"))
			return true
		}
		h.pushLocked(env)
	case wire.TypeReplaced:
		h.gone = true
		h.pushLocked(env)
	}
	return true
}

func (h *bhost) pushLocked(env relay.Envelope) {
	h.queue = append(h.queue, env)
	close(h.wake)
	h.wake = make(chan struct{})
}

// replyLater answers the relay on a goroutine of the Builtin's: Deliver
// may not call back into the relay.
func (h *bhost) replyLater(env relay.Envelope) {
	b := h.b
	b.gmu.Lock()
	defer b.gmu.Unlock()
	if b.closed {
		return
	}
	b.wg.Go(func() {
		<-h.ready
		h.ext.Send(env)
	})
}

func toolError(id, code, msg string) relay.Envelope {
	b, _ := json.Marshal(map[string]any{"ok": false, "code": code, "message": msg})
	return relay.Envelope{Type: wire.TypeToolResult, ReplyTo: id, Payload: b}
}

// typeCancel is queued by Cancel to end the run.
const typeCancel = "ingress.cancel"

// Invoke posts the message to the agent and streams the run.
func (b *Builtin) Invoke(ctx context.Context, req InvokeRequest, started func(string), emit func(Event)) error {
	h, err := b.host(req.Session)
	if err != nil {
		return err
	}
	r := &brun{id: "run_" + wire.NewID()[:16], emit: emit, calls: map[string]string{}, approvals: map[string]string{}, pending: map[string]bpending{}}
	h.mu.Lock()
	if h.run != nil {
		h.mu.Unlock()
		return ErrRunOpen
	}
	h.run = r
	h.queue = h.queue[:0] // what came before the run is not the run's
	studying := h.studying
	h.mu.Unlock()
	b.mu.Lock()
	b.runs[r.id] = h
	b.mu.Unlock()
	defer b.endRun(h, r)
	started(r.id)
	if !studying {
		// The agent's messages and tool calls need an active study
		// session: the client's host starts one, as a host's UI may.
		h.ext.Send(relay.Envelope{Type: wire.TypeSessionStarted, Payload: json.RawMessage("{}")})
	}
	msg, _ := json.Marshal(map[string]string{"text": req.Message.Content, "runId": r.id, "user": req.UserID})
	h.ext.Send(relay.Envelope{Type: wire.TypeUserMessage, Payload: msg})
	begun := b.o.Now()
	deltas := 0
	for {
		env, ok := h.next(ctx)
		if !ok {
			return ctx.Err()
		}
		switch env.Type {
		case typeCancel:
			return context.Canceled
		case relay.TypeAgentWaiting:
			u, _ := json.Marshal(map[string]int64{"duration_ms": b.o.Now().Sub(begun).Milliseconds(), "messages": int64(deltas)})
			emit(Event{Type: wire.IngressDone, RunID: r.id, Usage: u})
			return nil
		case wire.TypeAgentMessage:
			var p struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(env.Payload, &p)
			deltas++
			emit(Event{Type: wire.IngressDelta, RunID: r.id, Text: p.Text})
		case wire.TypeToolCall:
			b.toolCall(h, r, env)
		case wire.TypeReplaced:
			return orchError("another host took over relay session %q", h.name)
		}
	}
}

// next waits for the host's next envelope; false when ctx ends.
func (h *bhost) next(ctx context.Context) (relay.Envelope, bool) {
	for {
		h.mu.Lock()
		if len(h.queue) > 0 {
			env := h.queue[0]
			h.queue = h.queue[1:]
			h.mu.Unlock()
			return env, true
		}
		wake := h.wake
		h.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return relay.Envelope{}, false
		}
	}
}

// endRun frees the host for the next run; the agent's calls the client
// did not answer get an error.
func (b *Builtin) endRun(h *bhost, r *brun) {
	h.mu.Lock()
	h.run = nil
	var open []string // the agent's calls (relay ids)
	for _, id := range r.calls {
		open = append(open, id)
	}
	for _, id := range r.approvals {
		open = append(open, id)
	}
	h.mu.Unlock()
	b.mu.Lock()
	delete(b.runs, r.id)
	for tc := range r.calls {
		delete(b.calls, tc)
	}
	for ap := range r.approvals {
		delete(b.approvals, ap)
	}
	b.mu.Unlock()
	for _, id := range open {
		if h.ext.Waiting(id) {
			h.ext.Send(toolError(id, wire.ToolExecutionFailed, fmt.Sprintf("the Ingress run %s ended before the client answered", r.id)))
		}
	}
}

// toolCall turns the agent's call of a client tool into a tool_request,
// or into an approval_required first.
func (b *Builtin) toolCall(h *bhost, r *brun, env relay.Envelope) {
	var p struct {
		ToolName string          `json:"toolName"`
		Params   json.RawMessage `json:"params"`
		Reason   string          `json:"reason"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	if len(p.Params) == 0 || string(p.Params) == "null" {
		p.Params = json.RawMessage("{}")
	}
	h.mu.Lock()
	t, ok := h.tools[p.ToolName]
	h.mu.Unlock()
	if !ok {
		h.ext.Send(toolError(env.ID, wire.InvalidParams, fmt.Sprintf("the Ingress client declares no tool %q", truncate(p.ToolName, 64))))
		return
	}
	tcID := newCallID()
	if !t.RequiresApproval {
		b.sendToolRequest(h, r, env.ID, tcID, t.Name, p.Params)
		return
	}
	apID := "ap_" + wire.NewID()[:16]
	h.mu.Lock()
	r.approvals[apID] = env.ID
	r.pending[apID] = bpending{relayID: env.ID, tcID: tcID, tool: t.Name, params: p.Params}
	h.mu.Unlock()
	b.mu.Lock()
	b.approvals[apID] = h
	b.mu.Unlock()
	summary := p.Reason
	if args := string(p.Params); args != "{}" {
		summary += " — " + truncate(args, maxSummaryLen)
	}
	r.emit(Event{Type: wire.IngressApprovalRequired, RunID: r.id, ApprovalID: apID, ToolCallID: tcID, ToolName: t.Name, ArgsSummary: summary})
}

// sendToolRequest sends the agent's call relayID to the client as tool
// call tcID.
func (b *Builtin) sendToolRequest(h *bhost, r *brun, relayID, tcID, name string, args json.RawMessage) {
	h.mu.Lock()
	r.calls[tcID] = relayID
	h.mu.Unlock()
	b.mu.Lock()
	b.calls[tcID] = &bcall{h: h, runID: r.id, relayID: relayID}
	b.mu.Unlock()
	r.emit(Event{Type: wire.IngressToolRequest, RunID: r.id, ToolCallID: tcID, ToolName: name, Args: args,
		DeadlineTs: b.o.Now().Add(b.o.ToolDeadline).UnixMilli()})
}

// SubmitToolResult answers the agent's call; only for the run the
// tool_request went to.
func (b *Builtin) SubmitToolResult(_ context.Context, id string, res ToolResult) error {
	b.mu.Lock()
	c := b.calls[id]
	if c != nil && c.runID != res.RunID {
		c = nil // another run's call
	}
	if c != nil {
		delete(b.calls, id)
	}
	b.mu.Unlock()
	if c == nil {
		return errorf(wire.IngressInvalidMessage, "tool call %s is not waiting for a result of run %s", id, res.RunID)
	}
	h := c.h
	h.mu.Lock()
	if h.run != nil {
		delete(h.run.calls, id)
	}
	h.mu.Unlock()
	if !res.OK {
		msg := res.Error
		if msg == "" {
			msg = "the client's tool failed"
		}
		h.ext.Send(toolError(c.relayID, wire.ToolExecutionFailed, msg))
		return nil
	}
	var result any = json.RawMessage("null")
	if len(res.Result) > 0 {
		result = res.Result
	}
	p, _ := json.Marshal(map[string]any{"ok": true, "result": result})
	h.ext.Send(relay.Envelope{Type: wire.TypeToolResult, ReplyTo: c.relayID, Payload: p})
	return nil
}

// Decide sends the approved call to the client, or answers the agent's
// call with the rejection.
func (b *Builtin) Decide(_ context.Context, apID string, d Decision) error {
	b.mu.Lock()
	h := b.approvals[apID]
	delete(b.approvals, apID)
	b.mu.Unlock()
	if h == nil {
		return errorf(wire.IngressInvalidMessage, "approval %s is not waiting", apID)
	}
	h.mu.Lock()
	r := h.run
	var call bpending
	ok := false
	if r != nil && (d.RunID == "" || d.RunID == r.id) {
		call, ok = r.pending[apID]
		delete(r.pending, apID)
		delete(r.approvals, apID)
	}
	h.mu.Unlock()
	if !ok {
		return errorf(wire.IngressInvalidMessage, "approval %s: its run ended", apID)
	}
	if d.Decision == wire.IngressApprove {
		b.sendToolRequest(h, r, call.relayID, call.tcID, call.tool, call.params)
		return nil
	}
	reason := d.Reason
	if reason == "" {
		reason = "no reason given"
	}
	h.ext.Send(toolError(call.relayID, wire.ToolExecutionFailed, fmt.Sprintf("rejected: the person did not approve this call (%s, decided in the %s)", reason, d.DecidedBy)))
	return nil
}

// Cancel ends the run; the agent's open calls get an error.
func (b *Builtin) Cancel(_ context.Context, runID string) error {
	b.mu.Lock()
	h := b.runs[runID]
	b.mu.Unlock()
	if h == nil {
		return errorf(wire.IngressInvalidMessage, "run %s is not open", runID)
	}
	h.mu.Lock()
	if h.run != nil && h.run.id == runID {
		h.pushLocked(relay.Envelope{Type: typeCancel})
	}
	h.mu.Unlock()
	return nil
}
