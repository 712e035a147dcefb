package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// What a run asks of the client: tool_requests until their result or
// deadline, and approvals, decided by a device or by the person in the
// inbox, whichever comes first (run.go has the runs themselves).

// trackToolLocked remembers a tool_request until its result or deadline.
func (s *session) trackToolLocked(ev Event) {
	if old := s.tools[ev.ToolCallID]; old != nil {
		old.stop()
	} else if len(s.tools) >= maxPending {
		s.h.log.Warn("ingress session has too many tool calls waiting; not tracking another", "session", s.id)
		return
	}
	tc := &toolCall{id: ev.ToolCallID, runID: ev.RunID}
	s.tools[tc.id] = tc
	if ev.DeadlineTs > 0 {
		d := time.Until(time.UnixMilli(ev.DeadlineTs))
		tc.timer = time.AfterFunc(max(d, 0), func() { s.expire(tc) })
	}
}

// expire gives up on a tool call past its deadline_ts: the orchestrator
// gets a failed result, the devices a state event, and a late
// tool_result an error.
func (s *session) expire(tc *toolCall) {
	s.mu.Lock()
	if s.tools[tc.id] != tc {
		s.mu.Unlock()
		return
	}
	delete(s.tools, tc.id)
	detail, _ := json.Marshal(map[string]string{"tool_call_id": tc.id})
	s.broadcastLocked(Event{Type: wire.IngressState, RunID: tc.runID, State: wire.IngressStateExpired, Detail: detail})
	s.mu.Unlock()
	s.submit(tc, ToolResult{RunID: tc.runID, OK: false, Error: "deadline_exceeded: the client sent no tool_result before deadline_ts"})
}

// toolResult hands a client's tool_result to the orchestrator.
func (s *session) toolResult(m Message) *Error {
	s.mu.Lock()
	tc := s.tools[m.ToolCallID]
	if tc == nil {
		s.mu.Unlock()
		return errorf(wire.IngressInvalidMessage, "tool_result: tool call %s is not waiting for a result (unknown, answered already, or past its deadline_ts)", m.ToolCallID)
	}
	if m.RunID != "" && tc.runID != "" && m.RunID != tc.runID {
		s.mu.Unlock()
		return errorf(wire.IngressInvalidMessage, "tool_result: tool call %s belongs to run %s, not %s", m.ToolCallID, tc.runID, m.RunID)
	}
	delete(s.tools, tc.id)
	tc.stop()
	s.mu.Unlock()
	res := m.Result
	if len(strings.TrimSpace(string(res))) == 0 {
		res = nil
	}
	s.submit(tc, ToolResult{RunID: tc.runID, OK: m.OK, Result: res, Error: m.Error})
	return nil
}

func (s *session) submit(tc *toolCall, res ToolResult) {
	h := s.h
	h.goroutines.Go(func() {
		ctx, cancel := context.WithTimeout(h.ctx, h.o.CallTimeout)
		defer cancel()
		if err := h.o.Orchestrator.SubmitToolResult(ctx, tc.id, res); err != nil {
			e := asError(err, "tool_result "+tc.id)
			s.broadcast(Event{Type: wire.IngressError, RunID: tc.runID, ToolCallID: tc.id, Code: e.Code, Message: e.Message})
		}
	})
}

// trackApprovalLocked remembers an approval_required and asks the person
// in the inbox too.
func (s *session) trackApprovalLocked(r *run, ev Event) {
	if s.approvals[ev.ApprovalID] != nil {
		return // asked already
	}
	if len(s.approvals) >= maxPending {
		s.h.log.Warn("ingress session has too many approvals waiting; not tracking another", "session", s.id)
		return
	}
	ap := &approval{id: ev.ApprovalID, runID: ev.RunID, hubID: "ingress-" + s.id + "-" + ev.ApprovalID,
		toolName: ev.ToolName, summary: ev.ArgsSummary}
	s.approvals[ap.id] = ap
	ctx := s.h.ctx
	if r != nil {
		ctx = r.ctx
	}
	if s.h.o.Hub != nil {
		s.h.goroutines.Go(func() { s.askInbox(ctx, ap) })
	}
}

// Meta keys of an inbox answer given for a device's approval_decision.
const (
	metaDecision = "ingress_decision"
	metaReason   = "ingress_reason"
)

// askInbox shows the approval in the token's inbox and waits for its
// outcome: the person's answer, or a device's decision given through
// the hub (decide), whichever came first.
func (s *session) askInbox(ctx context.Context, ap *approval) {
	h := s.h
	text := fmt.Sprintf("**Approval required** for `%s` (Ingress client %s, run %s)\n\n%s\n\nReply **approve** to allow it; any other answer rejects it, and your words are passed on as the reason.",
		ap.toolName, s.info.UserID, ap.runID, ap.summary)
	rep, err := h.o.Hub.Ask(ctx, s.info.Token, hub.Request{Kind: wire.AskQuestion, ID: ap.hubID, Text: text,
		ProjectDirectory: "Ingress · " + s.info.UserID, Timeout: h.o.ApprovalTimeout,
		AgentName: "Ingress", McpClientName: s.info.Meta.App, Door: "ingress"})
	ap.settled.Store(true)
	var d Decision
	switch {
	case err == nil:
		d = decisionOf(rep)
	case errors.Is(err, hub.ErrTimeout):
		d = Decision{Decision: wire.IngressReject, Reason: fmt.Sprintf("no decision within %s", h.o.ApprovalTimeout), DecidedBy: "timeout"}
	case ctx.Err() != nil:
		// The run ended: the question goes (the run's context is done).
		_ = h.o.Hub.Cancel(context.Background(), s.info.Token, ap.hubID)
		return
	default:
		h.log.Warn("ingress approval: the inbox question failed", "approval", ap.id, "err", err)
		return
	}
	d.RunID = ap.runID
	s.decided(ap, d)
}

// decisionOf reads an inbox answer: a device's decision (its meta, in
// an answer of the Ingress door's: decide), or the person's words, which
// approve only when they say so. An inbox client may write any meta.
func decisionOf(rep *hub.Reply) Decision {
	if d := rep.Meta[metaDecision]; d != "" && rep.Door == "ingress" {
		return Decision{Decision: d, Reason: rep.Meta[metaReason], DecidedBy: "client"}
	}
	var b strings.Builder
	for _, c := range rep.Contents {
		if t := c.GetText(); t != nil {
			b.WriteString(t.GetText())
		}
	}
	text := strings.TrimSpace(b.String())
	word := strings.ToLower(strings.TrimRight(strings.Fields(text + " x")[0], ".!,;:。！，"))
	switch word {
	case "approve", "approved", "yes", "y", "ok", "allow", "同意", "批准", "确认", "是":
		return Decision{Decision: wire.IngressApprove, Reason: text, DecidedBy: "inbox"}
	}
	return Decision{Decision: wire.IngressReject, Reason: text, DecidedBy: "inbox"}
}

// decide takes a device's approval_decision. With the inbox, it is an
// answer to the inbox question, so the hub picks the first of the two.
func (s *session) decide(dev *device, m Message) *Error {
	s.mu.Lock()
	ap := s.approvals[m.ApprovalID]
	if ap == nil || ap.done {
		s.mu.Unlock()
		return errorf(wire.IngressInvalidMessage, "approval_decision: approval %s is not waiting (unknown, decided already, or its run ended)", m.ApprovalID)
	}
	if m.RunID != "" && ap.runID != "" && m.RunID != ap.runID {
		s.mu.Unlock()
		return errorf(wire.IngressInvalidMessage, "approval_decision: approval %s belongs to run %s, not %s", m.ApprovalID, ap.runID, m.RunID)
	}
	s.mu.Unlock()
	d := Decision{RunID: ap.runID, Decision: m.Decision, Reason: m.Reason, DecidedBy: "client"}
	h := s.h
	if h.o.Hub == nil {
		h.goroutines.Go(func() { s.decided(ap, d) })
		return nil
	}
	h.goroutines.Go(func() {
		text := m.Decision
		if m.Reason != "" {
			text += ": " + m.Reason
		}
		rep := hub.Reply{Meta: map[string]string{metaDecision: m.Decision, metaReason: m.Reason}, ClientID: dev.id,
			Nickname: "Ingress · " + s.info.UserID, Door: "ingress",
			Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: text}}}}
		// The question is answerable once the hub has saved and shown it,
		// a moment after approval_required went out.
		wait := time.NewTicker(10 * time.Millisecond)
		defer wait.Stop()
		for try := 0; ; try++ {
			err := h.o.Hub.Answer(h.ctx, s.info.Token, wire.AskQuestion, ap.hubID, rep)
			switch {
			case err == nil:
				return // askInbox carries the decision on
			case errors.Is(err, hub.ErrNotPending) && !ap.settled.Load() && try < 500:
				select {
				case <-wait.C:
					continue
				case <-h.ctx.Done():
					return
				}
			case errors.Is(err, hub.ErrNotPending):
				dev.send(Event{Type: wire.IngressError, Ts: time.Now().UnixMilli(), RunID: ap.runID, ApprovalID: ap.id, Code: wire.IngressInvalidMessage,
					Message: fmt.Sprintf("approval_decision: approval %s was decided already; the first decision wins", ap.id)})
			default:
				dev.send(Event{Type: wire.IngressError, Ts: time.Now().UnixMilli(), RunID: ap.runID, ApprovalID: ap.id, Code: wire.IngressInternalError,
					Message: "approval_decision: " + err.Error()})
			}
			return
		}
	})
	return nil
}

// decided applies an approval's first decision: the devices get a state
// event (who decided, and how), then the orchestrator the decision.
func (s *session) decided(ap *approval, d Decision) {
	s.mu.Lock()
	if ap.done {
		s.mu.Unlock()
		return
	}
	ap.done = true
	delete(s.approvals, ap.id)
	state := wire.IngressStateRunning
	if d.Decision != wire.IngressApprove {
		state = wire.IngressStateRejected
	}
	detail, _ := json.Marshal(map[string]string{"approval_id": ap.id, "decision": d.Decision, "reason": d.Reason, "decided_by": d.DecidedBy})
	s.broadcastLocked(Event{Type: wire.IngressState, RunID: ap.runID, State: state, Detail: detail})
	s.mu.Unlock()
	h := s.h
	ctx, cancel := context.WithTimeout(h.ctx, h.o.CallTimeout)
	defer cancel()
	if err := h.o.Orchestrator.Decide(ctx, ap.id, d); err != nil {
		e := asError(err, "approval "+ap.id)
		s.broadcast(Event{Type: wire.IngressError, RunID: ap.runID, ApprovalID: ap.id, Code: e.Code, Message: e.Message})
	}
}
