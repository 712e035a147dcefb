package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// run is one agent run of a session. Its fields past cancel are
// guarded by session.mu.
type run struct {
	id        string // set by started
	requestID string
	ctx       context.Context
	cancel    context.CancelFunc
	begun     time.Time
	cancelled bool // cancel_run, or the last device left
	ended     bool // its done or error was sent
}

// toolCall is a tool_request waiting for the client's tool_result.
type toolCall struct {
	id, runID string
	timer     *time.Timer // the deadline_ts, if any
}

func (tc *toolCall) stop() {
	if tc.timer != nil {
		tc.timer.Stop()
	}
}

// approval is an approval_required waiting for a decision, from a device
// or from the person in the inbox.
type approval struct {
	id, runID, hubID string
	toolName         string
	summary          string
	done             bool        // decided, or its run ended; under session.mu
	settled          atomic.Bool // its question in the inbox has an outcome
}

const maxPending = 1024 // tool calls and approvals waiting per session

// invoke starts a run for agent_invoke.
func (s *session) invoke(m Message) *Error {
	h := s.h
	ctx, cancel := context.WithCancel(h.ctx)
	r := &run{requestID: m.RequestID, ctx: ctx, cancel: cancel, begun: time.Now()}
	s.mu.Lock()
	if len(s.runs)+len(s.starting) >= h.o.MaxRuns {
		s.mu.Unlock()
		cancel()
		return errorf(wire.IngressInvalidMessage, "agent_invoke: session %s has %d runs open; wait for one to end or cancel one", s.id, h.o.MaxRuns)
	}
	s.starting[r] = struct{}{}
	s.mu.Unlock()
	msg := *m.Message
	msg.Role = "user"
	req := InvokeRequest{Session: s.info, RequestID: m.RequestID, SessionID: s.id, UserID: s.info.UserID, AgentID: m.AgentID, Message: msg}
	if !h.goroutines.Go(func() {
		err := h.o.Orchestrator.Invoke(ctx, req, func(id string) { s.started(r, id, m.AgentID) }, func(ev Event) { s.emit(r, ev) })
		s.finish(r, err)
	}) {
		s.mu.Lock()
		delete(s.starting, r)
		s.mu.Unlock()
		cancel()
		return errorf(wire.IngressInternalError, "the server is shutting down")
	}
	return nil
}

// started registers the run under its id and tells the devices.
func (s *session) started(r *run, id, agentID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.starting, r)
	if r.ended || r.id != "" {
		return
	}
	if _, dup := s.runs[id]; dup || !idPattern.MatchString(id) {
		id = "run_" + wire.NewID()[:16] // the orchestrator's id is unusable; ours keeps runs apart
	}
	r.id = id
	s.runs[id] = r
	s.broadcastLocked(Event{Type: wire.IngressRunStarted, RequestID: r.requestID, RunID: id, SessionID: s.id, AgentID: agentID})
	s.flushEarlyLocked(r)
}

// flushEarlyLocked sends the pushed events held for run r (or, with r
// nil, for no run once none is starting) after its run_started.
func (s *session) flushEarlyLocked(r *run) {
	if len(s.early) == 0 || (r == nil && len(s.starting) > 0) {
		return
	}
	var keep []Event
	for _, ev := range s.early {
		switch {
		case r != nil && ev.RunID == r.id:
			s.emitLocked(r, ev)
		case r == nil:
			s.emitLocked(nil, ev)
		default:
			keep = append(keep, ev)
		}
	}
	s.early = keep
}

// runOf returns the open run id, or nil.
func (s *session) runOf(id string) *run {
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// emit sends an event of run r (nil: of no run known here) to every
// device, after tracking what it asks of the client.
func (s *session) emit(r *run, ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == nil && ev.RunID != "" && s.runs[ev.RunID] == nil && len(s.starting) > 0 && len(s.early) < maxPending {
		// Pushed (POST /internal/send) for a run whose stream has not
		// named it yet: held until its run_started is out.
		s.early = append(s.early, ev)
		return
	}
	s.emitLocked(r, ev)
}

func (s *session) emitLocked(r *run, ev Event) {
	if r == nil && ev.RunID != "" {
		r = s.runs[ev.RunID]
	}
	if r != nil {
		if r.ended || r.id == "" {
			return
		}
		ev.RunID = r.id
	}
	switch ev.Type {
	case wire.IngressRunStarted, wire.IngressHelloAck:
		return // ours to send
	case wire.IngressToolRequest:
		s.trackToolLocked(ev)
	case wire.IngressApprovalRequired:
		s.trackApprovalLocked(r, ev)
	}
	if r != nil && ev.terminal() {
		s.endLocked(r)
	}
	s.broadcastLocked(ev)
}

// endLocked marks r ended and drops what it waited on; the inbox
// question of an approval is withdrawn as r's context ends.
func (s *session) endLocked(r *run) {
	r.ended = true
	if s.runs[r.id] == r {
		delete(s.runs, r.id)
	}
	for id, tc := range s.tools {
		if tc.runID == r.id {
			tc.stop()
			delete(s.tools, id)
		}
	}
	for id, ap := range s.approvals {
		if ap.runID == r.id {
			ap.done = true
			delete(s.approvals, id)
		}
	}
	r.cancel()
}

// finish ends a run whose Invoke returned without its done or error.
func (s *session) finish(r *run, err error) {
	s.mu.Lock()
	delete(s.starting, r)
	if !r.ended {
		var e *Error
		switch {
		case r.id == "" && r.cancelled:
			detail, _ := json.Marshal(map[string]string{"request_id": r.requestID})
			s.broadcastLocked(Event{Type: wire.IngressState, RequestID: r.requestID, State: wire.IngressStateCancelled, Detail: detail})
		case r.id == "":
			e = asError(err, "agent_invoke")
			s.broadcastLocked(Event{Type: wire.IngressError, RequestID: r.requestID, Code: e.Code, Message: e.Message})
		case r.cancelled:
			s.broadcastLocked(Event{Type: wire.IngressState, RunID: r.id, State: wire.IngressStateCancelled, Detail: json.RawMessage("{}")})
			s.broadcastLocked(Event{Type: wire.IngressDone, RunID: r.id, Usage: usage(time.Since(r.begun))})
		default:
			e = asError(err, "run "+r.id)
			s.broadcastLocked(Event{Type: wire.IngressError, RunID: r.id, Code: e.Code, Message: e.Message})
		}
		s.endLocked(r)
	}
	s.flushEarlyLocked(nil)
	s.mu.Unlock()
	r.cancel()
}

// asError maps an orchestrator's error to the wire.
func asError(err error, what string) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case err == nil:
		return errorf(wire.IngressOrchestratorError, "%s: the orchestrator ended the run without done or error", what)
	case errors.Is(err, ErrRunOpen):
		return errorf(wire.IngressOrchestratorError, "%s: %v", what, err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return errorf(wire.IngressOrchestratorError, "%s: cut off before the orchestrator ended it (the server is shutting down, or the call took too long)", what)
	}
	return errorf(wire.IngressOrchestratorError, "%s: %v", what, err)
}

func usage(d time.Duration) json.RawMessage {
	b, _ := json.Marshal(map[string]int64{"duration_ms": d.Milliseconds()})
	return b
}

// cancelRun asks the orchestrator to end a run; if it has not ended it
// cancelGrace later (or the orchestrator cannot be reached), its stream
// is cut.
func (s *session) cancelRun(id string) *Error {
	s.mu.Lock()
	r := s.runs[id]
	if r == nil || r.id == "" {
		s.mu.Unlock()
		return errorf(wire.IngressInvalidMessage, "cancel_run: no run %s is open in session %s", id, s.id)
	}
	if r.cancelled {
		s.mu.Unlock()
		return nil
	}
	r.cancelled = true
	s.mu.Unlock()
	h := s.h
	if !h.goroutines.Go(func() {
		ctx, cancel := context.WithTimeout(h.ctx, h.o.CallTimeout)
		err := h.o.Orchestrator.Cancel(ctx, id)
		cancel()
		if err != nil {
			h.log.Warn("ingress cancel_run: the orchestrator did not take it; cutting the run's stream", "run", id, "err", err)
			r.cancel()
			return
		}
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case <-r.ctx.Done():
		case <-t.C:
			r.cancel()
		}
	}) {
		r.cancel()
	}
	return nil
}

// cancelRequest is cancel_run naming the request_id of an agent_invoke:
// a run not started yet (the orchestrator has not named it) is cut off
// here, as no run id can reach the orchestrator; a started one is
// cancelled as cancel_run with its run_id is.
func (s *session) cancelRequest(rid string) *Error {
	s.mu.Lock()
	found := false
	for r := range s.starting {
		if r.requestID == rid && !r.cancelled {
			r.cancelled = true
			r.cancel()
			found = true
		}
	}
	var started []string
	for id, r := range s.runs {
		if r.requestID == rid && !r.cancelled {
			started = append(started, id)
		}
	}
	s.mu.Unlock()
	for _, id := range started {
		_ = s.cancelRun(id)
	}
	if !found && len(started) == 0 {
		return errorf(wire.IngressInvalidMessage, "cancel_run: no run of request %s is open in session %s", rid, s.id)
	}
	return nil
}
