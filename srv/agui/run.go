package agui

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// One run, served to its end on its request's goroutine: the events the
// agent's messages, tool calls and yield become, and the bounds on an
// agent that never takes the message or goes away after taking it.

// run serves one AG-UI run to its end.
func (h *Handler) run(ctx context.Context, t *thread, in *RunAgentInput, s *stream) {
	runNo, ok := t.open()
	t.logStarted(in)
	if !ok {
		s.emit(event{"type": RunStarted, "threadId": in.ThreadID, "runId": in.RunID})
		ev := event{"type": RunError, "message": fmt.Sprintf("thread %q has a run open already; wait for its RUN_FINISHED", in.ThreadID), "code": "run_open"}
		t.logEnd(in, ev)
		s.emit(ev)
		return
	}
	lost := false // the frontend went away before the run's end
	defer func() {
		if lost {
			t.logRun(studylog.Internal, logRunLost, map[string]any{"threadId": in.ThreadID, "runId": in.RunID})
		}
		t.close(runNo, lost)
	}()
	// The thread takes a new run as soon as this one's end is sent: the
	// frontend may post its next run the moment it reads it.
	end := func(ev event) {
		t.close(runNo, false)
		t.logEnd(in, ev)
		s.finish(ev)
	}
	s.emit(event{"type": RunStarted, "threadId": in.ThreadID, "runId": in.RunID})
	results, userMsg, err := t.plan(in)
	if err != nil { // nothing was changed
		end(event{"type": RunError, "message": err.Error(), "code": codeInvalidResult})
		return
	}
	notice, err := t.publish(in)
	if err != nil { // nothing was changed: the results wait, the message is not taken
		t.unplan(userMsg)
		end(event{"type": RunError, "code": codeStateNotKept, "message": "this run's state and tools were not kept, so nothing of the run " +
			"reached the agent (your message is not passed on, tool results still wait): " + relay.Refusal(err)})
		return
	}
	if len(notice) > 0 {
		h.log.Info("AG-UI tools renamed for the agent, or reachable only through call_ui_tool", "thread", in.ThreadID, "tools", notice)
		s.emit(event{"type": Custom, "name": customToolNames, "value": map[string]any{"tools": notice}})
	}
	hadTurn := false
	if userMsg != nil || len(results) > 0 {
		hadTurn = t.giveTurn()
	}
	t.deliverResults(results)
	// timer: an agent should have taken the user's message by then; once
	// one has (or with results), it is the agent's silence that is timed
	// (idle), and checked against whether any agent is still there. A
	// run that brings nothing (empty) is there for what an agent says on
	// its own: one should be at work or come within AgentWait.
	timer := time.NewTimer(h.o.AgentIdle)
	defer timer.Stop()
	idle, empty := true, false
	if userMsg != nil {
		if err := t.postUser(*userMsg); err != nil {
			t.unplan(userMsg)
			if len(results) == 0 {
				t.takeTurnBack(hadTurn)
			}
			end(event{"type": RunError, "code": codeMessageNotSent, "message": "your message was not passed to the agent, and is not kept: " +
				relay.Refusal(err)})
			return
		}
		timer.Reset(h.o.AgentWait)
		idle = false
	} else if len(results) == 0 && t.Ext.AgentWaiting() {
		t.yielded() // nothing new for an agent that waits for the user: what is queued, then the end
	} else if len(results) == 0 {
		timer.Reset(h.o.AgentWait)
		idle, empty = false, true
	}
	quiet := func() { // the agent spoke, or took the message: time its silence
		timer.Reset(h.o.AgentIdle)
		idle, empty = true, false
	}
	beat := time.NewTicker(keepAliveEvery)
	defer beat.Stop()
	for {
		if s.err != nil {
			// A write failed: the frontend went away, or read nothing
			// for the send bound (its writes would hold the run, and
			// the thread, for good). Cut off, as one that went away.
			lost = true
			return
		}
		env, ok := t.next(ctx, h.goroutines.Done(), timer.C, beat.C)
		if !ok {
			if ctx.Err() == nil {
				end(event{"type": RunError, "message": "the server is shutting down", "code": "shutdown"})
			} else {
				lost = true
			}
			return
		}
		if env.Type == typeKeepAlive {
			s.keepAlive()
			continue
		}
		if env.Type == typeAgentLate {
			switch {
			case !idle && t.Ext.Unheard():
				end(event{"type": RunError, "message": noAgentMessage(in.ThreadID, h.o.AgentWait), "code": "no_agent"})
				return
			case empty && !t.Ext.AgentPresent() && !t.atWork():
				end(event{"type": RunError, "message": nothingToDoMessage(in.ThreadID, h.o.AgentWait), "code": "no_agent"})
				return
			case idle && !t.Ext.AgentPresent():
				end(event{"type": RunError, "message": goneAgentMessage(in.ThreadID, h.o.AgentIdle), "code": "agent_gone"})
				return
			}
			quiet() // an agent took it, or is still there: at work
			continue
		}
		quiet() // the agent is there
		switch env.Type {
		case relay.TypeAgentWaiting:
			end(event{"type": RunFinished, "threadId": in.ThreadID, "runId": in.RunID})
			return
		case wire.TypeAgentMessage:
			var p struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(env.Payload, &p)
			id := "msg-" + wire.NewID()
			s.emit(event{"type": TextMessageStart, "messageId": id, "role": "assistant"})
			s.emit(event{"type": TextMessageContent, "messageId": id, "delta": p.Text})
			s.emit(event{"type": TextMessageEnd, "messageId": id})
		case wire.TypeToolCall:
			sent := t.emitCall(s, env)
			for _, more := range t.moreCalls() { // calls made together end the run together
				sent = t.emitCall(s, more) || sent
			}
			if !sent {
				continue // refused: the agent hears why and goes on
			}
			end(event{"type": RunFinished, "threadId": in.ThreadID, "runId": in.RunID})
			return
		case wire.TypeReplaced:
			end(event{"type": RunError, "message": fmt.Sprintf("another host took over relay session %q", in.ThreadID), "code": "replaced"})
			return
		}
	}
}

// keepAliveEvery is how often a run with nothing to say writes an SSE
// comment: a proxy's idle timeout is commonly 30 to 60 s.
const keepAliveEvery = 15 * time.Second

// goneAgentMessage says the agent went quiet and left thread.
func goneAgentMessage(thread string, waited time.Duration) string {
	return fmt.Sprintf("the agent has said nothing for %s and no agent is connected to thread %q any more: "+
		"it went away without answering. Start the agent again and send your message again.", waited, thread)
}

// nothingToDoMessage says a run brought nothing for an agent and no agent
// was there to speak on its own.
func nothingToDoMessage(thread string, waited time.Duration) string {
	return fmt.Sprintf("this run brought no user message and no tool result, and within %s no agent was at work in thread %q "+
		"or came to it, so nothing can answer it. Send a message to start a turn. To connect an agent, %s.",
		waited, thread, relay.ConnectAgent(thread))
}

// noAgentMessage says no agent took the user's message in thread, and
// how to connect one.
func noAgentMessage(thread string, waited time.Duration) string {
	return fmt.Sprintf("no agent took this message within %s: no agent is connected to thread %q, or it is busy. "+
		"The message is kept: an agent gets it when it calls wait_user_message. To connect one, %s.",
		waited, thread, relay.ConnectAgent(thread))
}
