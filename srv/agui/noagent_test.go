package agui

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestNoAgentEndsTheRun: a run brings the user's message and no agent
// takes it: past AgentWait the run ends with RUN_ERROR no_agent, saying
// how to connect one, and the message is kept for the agent that comes.
func TestNoAgentEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		start := time.Now()
		evs := a.post(context.Background(), "r1", map[string]any{"id": "u1", "role": "user", "content": "anyone?"})
		if waited := time.Since(start); waited != DefaultAgentWait {
			t.Errorf("the run ended after %s, want %s", waited, DefaultAgentWait)
		}
		if evTypes(evs) != "RUN_STARTED RUN_ERROR" || evs[1]["code"] != "no_agent" {
			t.Fatalf("events %v", evs)
		}
		msg := evs[1]["message"].(string)
		for _, want := range []string{`thread "th"`, "agentassistant-mcp -session th", "kept"} {
			if !strings.Contains(msg, want) {
				t.Errorf("RUN_ERROR message %q lacks %q", msg, want)
			}
		}
		env, ok := a.l.NextUserMessage(context.Background())
		if !ok || !strings.Contains(string(env.Payload), "anyone?") {
			t.Fatalf("the message was not kept: %s", env.Payload)
		}
	})
}

// TestBusyAgentKeepsTheRun: an agent that took the message may take its
// time: the run stays open past AgentWait and ends when it yields.
func TestBusyAgentKeepsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		done := make(chan []map[string]any, 1)
		go func() {
			done <- a.post(context.Background(), "r1", map[string]any{"id": "u1", "role": "user", "content": "think hard"})
		}()
		if _, ok := a.l.NextUserMessage(context.Background()); !ok {
			t.Fatal("no message")
		}
		time.Sleep(3 * DefaultAgentWait)
		synctest.Wait()
		select {
		case evs := <-done:
			t.Fatalf("the run ended while the agent worked: %v", evs)
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go a.l.NextUserMessage(ctx) // yields the turn
		if evs := <-done; evTypes(evs) != "RUN_STARTED RUN_FINISHED" {
			t.Fatalf("events %v", evs)
		}
		cancel()
	})
}

// TestGoneAgentEndsTheRun: an agent that took the message and then went
// away (its process ended, its connection closed) does not leave the run
// open forever: once it has been silent for AgentIdle with no agent in the
// relay session, the run ends with RUN_ERROR agent_gone.
func TestGoneAgentEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		done := make(chan []map[string]any, 1)
		start := time.Now()
		go func() {
			done <- a.post(context.Background(), "r1", map[string]any{"id": "u1", "role": "user", "content": "hello?"})
		}()
		if _, ok := a.l.NextUserMessage(context.Background()); !ok {
			t.Fatal("no message")
		}
		a.l.Close() // the agent's process ends
		evs := <-done
		if evTypes(evs) != "RUN_STARTED RUN_ERROR" || evs[1]["code"] != "agent_gone" {
			t.Fatalf("events %v", evs)
		}
		if waited := time.Since(start); waited < DefaultAgentIdle || waited > DefaultAgentIdle+DefaultAgentWait {
			t.Errorf("the run ended after %s, want about %s", waited, DefaultAgentIdle)
		}
		if msg := evs[1]["message"].(string); !strings.Contains(msg, `thread "th"`) {
			t.Errorf("RUN_ERROR message %q does not name the thread", msg)
		}
	})
}

// TestEmptyRunWithNoAgentEnds: a run that brings nothing (no user
// message, no tool result) while no agent is in the thread ends in
// AgentWait with RUN_ERROR no_agent, saying there is nothing to do and
// how to connect an agent (before, it stayed open until AgentIdle, and
// then blamed an agent that had gone); the thread stays the relay
// session's host, so an agent that comes later finds its UI.
func TestEmptyRunWithNoAgentEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		a.l.Close() // no agent in the thread
		start := time.Now()
		evs := a.post(context.Background(), "r1")
		if waited := time.Since(start); waited != DefaultAgentWait {
			t.Errorf("the run ended after %s, want %s", waited, DefaultAgentWait)
		}
		if evTypes(evs) != "RUN_STARTED RUN_ERROR" || evs[1]["code"] != "no_agent" {
			t.Fatalf("events %v", evs)
		}
		msg := evs[1]["message"].(string)
		for _, want := range []string{`thread "th"`, "agentassistant-mcp -session th", "no user message"} {
			if !strings.Contains(msg, want) {
				t.Errorf("RUN_ERROR message %q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "kept") {
			t.Errorf("RUN_ERROR message %q speaks of a kept message, and there is none", msg)
		}
		a.l = a.r.Local("tok", "th") // an agent comes: the thread is still the host
		a.startSession()
	})
}

// TestEmptyRunWithAnAgentAtWorkStays: a run that brings nothing while an
// agent is in the thread (in a call), or has the turn (it took the user's
// message and has not yielded: between its calls), stays open past
// AgentWait for what the agent says, and ends when it yields.
func TestEmptyRunWithAnAgentAtWorkStays(t *testing.T) {
	for _, betweenCalls := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			a := newAgent(t)
			a.post(context.Background(), "r0", map[string]any{"id": "u1", "role": "user", "content": "go"})
			if _, ok := a.l.NextUserMessage(context.Background()); !ok {
				t.Fatal("no message")
			}
			if betweenCalls {
				a.l.Close()
			}
			done := make(chan []map[string]any, 1)
			go func() { done <- a.post(context.Background(), "r1") }()
			time.Sleep(3 * DefaultAgentWait)
			synctest.Wait()
			select {
			case evs := <-done:
				t.Fatalf("between calls %v: the run ended while the agent worked: %v", betweenCalls, evs)
			default:
			}
			if betweenCalls {
				a.l = a.r.Local("tok", "th") // its next call
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go a.l.NextUserMessage(ctx) // yields the turn
			if evs := <-done; evTypes(evs) != "RUN_STARTED RUN_FINISHED" {
				t.Fatalf("between calls %v: events %v", betweenCalls, evs)
			}
		})
	}
}

// TestMessagesSayHowToConnect: AG-UI's messages tell how to connect an
// agent in the words every front door uses (relay.ConnectAgent).
func TestMessagesSayHowToConnect(t *testing.T) {
	for _, thread := range []string{"th", relay.DefaultSession} {
		for _, msg := range []string{noAgentMessage(thread, time.Second), nothingToDoMessage(thread, time.Second)} {
			if !strings.Contains(msg, relay.ConnectAgent(thread)) {
				t.Errorf("%q does not say %q", msg, relay.ConnectAgent(thread))
			}
		}
	}
}
