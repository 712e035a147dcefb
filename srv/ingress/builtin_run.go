package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// The built-in orchestrator's runs: an invoke through the agent's turn,
// the agent's calls of client tools (tool_request, approvals), and the
// client's answers to them (builtin.go has the hosts and sessions).

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
	h.last = ""
	h.queue = h.queue[:0] // what came before the run is not the run's
	studying, unpublished := h.studying, h.unpublished != nil
	h.mu.Unlock()
	b.mu.Lock()
	b.runs[r.id] = h
	b.mu.Unlock()
	defer b.endRun(h, r)
	started(r.id)
	if unpublished {
		// Tried again: the budget may have room now.
		if err := h.publish(); err != nil {
			b.ended(h, r, "the Ingress run %s ended before its message was passed to you: the client's tools are not published")
			emit(Event{Type: wire.IngressError, RunID: r.id, Code: wire.IngressOrchestratorError,
				Message: "the client's tools (client_meta.tools) are not published to the agent, so this run's message was not passed to the agent: " + relay.Refusal(err)})
			return nil
		}
	}
	if !studying {
		// The agent's messages and tool calls need an active study
		// session: the client's host starts one, as a host's UI may.
		_ = h.Ext.Send(relay.Envelope{Type: wire.TypeSessionStarted, Payload: json.RawMessage("{}")}) // carries no state
	}
	msg, _ := json.Marshal(map[string]string{"text": req.Message.Content, "runId": r.id, "user": req.UserID})
	if err := h.Ext.Send(relay.Envelope{Type: wire.TypeUserMessage, Payload: msg}); err != nil {
		b.ended(h, r, "the Ingress run %s ended: its message was not passed to you")
		emit(Event{Type: wire.IngressError, RunID: r.id, Code: wire.IngressOrchestratorError,
			Message: "the message was not passed to the agent, and is not kept: " + relay.Refusal(err)})
		return nil
	}
	begun := time.Now()
	deltas := 0
	// An agent should have taken the message by then; once it has said
	// anything in the run, it is there and may take its time.
	late := time.NewTimer(b.o.AgentWait)
	defer late.Stop()
	lateC := late.C
	for {
		env, ok := h.next(ctx, lateC)
		if !ok {
			b.ended(h, r, "the Ingress run %s was cancelled (by the client, or the server is shutting down)")
			return ctx.Err()
		}
		lateC = nil // the wait is over, or the agent acted: it is there
		switch env.Type {
		case typeLate:
			if !h.Ext.Unheard() {
				continue // an agent took it, or one on /agent/ws was sent it
			}
			detail, _ := json.Marshal(map[string]any{"relay_session": h.name, "waited_ms": b.o.AgentWait.Milliseconds(), "message_kept": true})
			b.ended(h, r, "the Ingress run %s ended before an agent took its message (the client was told no agent is connected)")
			emit(Event{Type: wire.IngressState, RunID: r.id, State: wire.IngressStateNoAgent, Detail: detail})
			emit(Event{Type: wire.IngressError, RunID: r.id, Code: wire.IngressOrchestratorError, Message: noAgentMessage(h.name, b.o.AgentWait)})
			return nil
		case typeCancel:
			b.ended(h, r, "the Ingress run %s was cancelled by the client (cancel_run)")
			return context.Canceled
		case relay.TypeAgentWaiting:
			b.ended(h, r, "the Ingress run %s ended (done) when you waited for the next message")
			u, _ := json.Marshal(map[string]int64{"duration_ms": time.Since(begun).Milliseconds(), "messages": int64(deltas)})
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

// typeLate is next's when the run's AgentWait is over.
const typeLate = "ingress.late"

// ended says how run r ended, for an agent that acts on it later (the
// format names the run with its %s). It is said before the run's last
// event goes out: the client may act on that event at once.
func (b *Builtin) ended(h *bhost, r *brun, format string) {
	h.mu.Lock()
	h.last = fmt.Sprintf(format, r.id)
	r.over = true
	h.mu.Unlock()
	// Over before the client hears so: the next agent_invoke it sends
	// on hearing the last event finds no run open.
	b.endRun(h, r)
}

// noAgentMessage says no agent took the message in relay session name,
// and how to connect one.
func noAgentMessage(name string, waited time.Duration) string {
	return fmt.Sprintf("no agent took this message within %s: no MCP agent is connected to relay session %q (client_meta.session), or it is busy. "+
		"The message is kept: an agent gets it when it calls wait_user_message, but what it answers reaches you only in an open run: "+
		"send agent_invoke again once an agent is connected (it gets this message first). To connect one, %s.",
		waited, name, relay.ConnectAgent(name))
}

// next waits for the host's next envelope, or a typeLate when late
// fires; false when ctx ends.
func (h *bhost) next(ctx context.Context, late <-chan time.Time) (relay.Envelope, bool) {
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
		case <-late:
			return relay.Envelope{Type: typeLate}, true
		case <-ctx.Done():
			return relay.Envelope{}, false
		}
	}
}

// endRun frees the host for the next run; the agent's calls the client
// did not answer, and those the run did not take up (it ended first),
// get an error, as do its messages the run did not take up that carry an
// id (an agent that asked to hear of them).
func (b *Builtin) endRun(h *bhost, r *brun) {
	r.end.Do(func() { b.endRunOnce(h, r) })
}

func (b *Builtin) endRunOnce(h *bhost, r *brun) {
	h.mu.Lock()
	h.run = nil
	h.last = cmp.Or(h.last, fmt.Sprintf("the Ingress run %s ended", r.id))
	var open []string // the agent's calls (relay ids)
	for _, id := range r.calls {
		open = append(open, id)
	}
	for _, id := range r.approvals {
		open = append(open, id)
	}
	var untaken, unsaid []string
	for _, env := range h.queue {
		switch {
		case env.Type == wire.TypeToolCall:
			untaken = append(untaken, env.ID)
		case env.Type == wire.TypeAgentMessage && env.ID != "":
			unsaid = append(unsaid, env.ID)
		}
	}
	h.queue = h.queue[:0]
	why := h.noRunLocked()
	h.mu.Unlock()
	for _, id := range untaken {
		_ = h.Ext.Send(toolError(id, wire.ToolExecutionFailed, why)) // carries no state
	}
	for _, id := range unsaid {
		_ = h.Ext.Send(messageError(id, why)) // carries no state
	}
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
		if h.Ext.Waiting(id) {
			_ = h.Ext.Send(toolError(id, wire.ToolExecutionFailed, fmt.Sprintf("the Ingress run %s ended before the client answered", r.id))) // carries no state
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
		_ = h.Ext.Send(toolError(env.ID, wire.InvalidParams, fmt.Sprintf("the Ingress client declares no tool %q", wire.Clip(p.ToolName, 64)))) // carries no state
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
		summary += " — " + wire.Clip(args, maxSummaryLen)
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
		DeadlineTs: time.Now().Add(toolDeadline).UnixMilli()})
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
		msg := cmp.Or(res.Error, "the client's tool failed")
		_ = h.Ext.Send(toolError(c.relayID, wire.ToolExecutionFailed, msg)) // carries no state
		return nil
	}
	var result any = json.RawMessage("null")
	if len(res.Result) > 0 {
		result = res.Result
	}
	p, _ := json.Marshal(map[string]any{"ok": true, "result": result})
	_ = h.Ext.Send(relay.Envelope{Type: wire.TypeToolResult, ReplyTo: c.relayID, Payload: p}) // the answer reaches its agent even when its state is not kept
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
	reason := cmp.Or(d.Reason, "no reason given")
	_ = h.Ext.Send(toolError(call.relayID, wire.ToolExecutionFailed, fmt.Sprintf("rejected: the person did not approve this call (%s, decided in the %s)", reason, d.DecidedBy))) // carries no state
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
	if h.run != nil && h.run.id == runID && !h.run.cancelled {
		h.run.cancelled = true // what the agent sends from now on is refused (Deliver)
		h.pushLocked(relay.Envelope{Type: typeCancel})
	}
	h.mu.Unlock()
	return nil
}
