package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// The relay's timers, on synctest's clock: how long an in-process agent
// waits for the host, for a state, for a refusal, and how long a call the
// host never answered keeps its id.

// studyHost is a relay session with an in-process host and an active
// study session, so tool calls go through.
func studyHost(t *testing.T) (*Relay, *localPeer, *channel) {
	t.Helper()
	logs, err := studylog.Open(t.TempDir(), studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{Logs: logs})
	host, ch := localHost(r, "tok", "s")
	drain(host)
	l := r.Local("tok", "s")
	defer l.Close()
	started := make(chan Reply, 1)
	go func() {
		rep, _ := l.Request(t.Context(), wire.TypeSessionStart, json.RawMessage(`{}`))
		started <- rep
	}()
	start := (<-host.replies).Envelope
	for start.Type != wire.TypeSessionStart { // relay.session comes first
		start = (<-host.replies).Envelope
	}
	ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeSessionStarted, ReplyTo: start.ID, Payload: json.RawMessage(`{}`)})
	if rep := <-started; rep.Type != wire.TypeSessionStarted {
		t.Fatalf("session.start: %+v", rep)
	}
	drain(host)
	return r, host, ch
}

// drain empties what the host was sent.
func drain(p *localPeer) {
	for {
		select {
		case <-p.replies:
		default:
			return
		}
	}
}

var toolCall = json.RawMessage(`{"toolName":"select","params":{"itemId":"m1"},"reason":"test"}`)

// TestToolCallTimeout: a tool call the host does not answer ends at the
// caller's deadline, not before; the host's late answer reaches no one,
// and the call's id stays taken until it comes.
func TestToolCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, host, ch := studyHost(t)
		defer r.Close()
		other := ch.localPeer(8)
		ch.joinAgent(other, "o")
		drain(other)
		l := r.Local("tok", "s")
		defer l.Close()

		const timeout = 20 * time.Second
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_, err := l.Request(ctx, wire.TypeToolCall, toolCall)
			done <- err
		}()
		call := (<-host.replies).Envelope
		time.Sleep(timeout - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the call ended before its deadline: %v", err)
		default:
		}
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != timeout {
			t.Fatalf("the call ended after %v with %v, want the deadline", time.Since(start), err)
		}
		ch.mu.Lock()
		_, taken := ch.inflight[call.ID]
		ch.mu.Unlock()
		if !taken {
			t.Fatal("the id of a call still with the host was freed")
		}
		ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeToolResult, ReplyTo: call.ID, Payload: json.RawMessage(`{"ok":true}`)})
		ch.mu.Lock()
		_, taken = ch.inflight[call.ID]
		ch.mu.Unlock()
		if taken {
			t.Fatal("the id stayed taken after the host answered")
		}
		select {
		case m := <-other.replies:
			t.Fatalf("the late answer went to another agent: %+v", m)
		default:
		}
	})
}

// TestStaleCallsForgotten: once a relay session has many calls the host
// never answered, those older than two minutes are forgotten, the newer
// ones kept.
func TestStaleCallsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, host, ch := studyHost(t)
		defer r.Close()
		agent := ch.localPeer(maxInflight)
		ch.joinAgent(agent, "a")
		send := func(n int) {
			for range n {
				ch.fromAgent(agent, Envelope{V: wire.Version, Type: wire.TypeToolCall, ID: "c", Payload: toolCall})
			}
			drain(host)
		}
		inflight := func() int {
			ch.mu.Lock()
			defer ch.mu.Unlock()
			return len(ch.inflight)
		}
		send(maxInflight / 4)
		time.Sleep(2*time.Minute - time.Nanosecond)
		send(1) // many in flight, none two minutes old: all kept
		if n := inflight(); n != maxInflight/4+1 {
			t.Fatalf("%d calls in flight, want %d: none is two minutes old", n, maxInflight/4+1)
		}
		time.Sleep(2 * time.Nanosecond)
		send(1)
		if n := inflight(); n != 2 {
			t.Fatalf("%d calls in flight, want the 2 younger than two minutes", n)
		}
	})
}

// TestWaitState: waiting for the state after a call returns as soon as a
// newer state.updated comes, else after the wait, with the latest state.
func TestWaitState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{})
		defer r.Close()
		host, ch := localHost(r, "tok", "s")
		l := r.Local("tok", "s")
		defer l.Close()
		v := l.State().Version

		start := time.Now()
		if s := l.WaitState(t.Context(), v, 1500*time.Millisecond); s.Version != v || time.Since(start) != 1500*time.Millisecond {
			t.Fatalf("with no update: version %d after %v", s.Version, time.Since(start))
		}
		start = time.Now()
		go func() {
			time.Sleep(300 * time.Millisecond)
			ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeStateUpdated, Payload: json.RawMessage(`{"uiSpec":{"stage":"seats"}}`)})
		}()
		s := l.WaitState(t.Context(), v, 1500*time.Millisecond)
		if s.Version != v+1 || string(s.UISpec) != `{"stage":"seats"}` || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("with an update at 300ms: version %d %s after %v", s.Version, s.UISpec, time.Since(start))
		}
	})
}

// TestPostGrace: a message that gets no reply waits the grace for a
// refusal, no longer; a refusal within it is returned.
func TestPostGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, host, ch := studyHost(t)
		defer r.Close()
		l := r.Local("tok", "s")
		defer l.Close()
		const grace = 300 * time.Millisecond
		msg := json.RawMessage(`{"text":"hello"}`)

		start := time.Now()
		if env, failed := l.Post(t.Context(), wire.TypeAgentMessage, msg, grace); failed || time.Since(start) != grace {
			t.Fatalf("an accepted message: %+v %v after %v", env, failed, time.Since(start))
		}
		drain(host)

		start = time.Now()
		go func() {
			m := (<-host.replies).Envelope
			time.Sleep(100 * time.Millisecond)
			ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeError, ReplyTo: m.ID,
				Payload: mustJSON(errorf(wire.InvalidParams, "too long"))})
		}()
		env, failed := l.Post(t.Context(), wire.TypeAgentMessage, msg, grace)
		if !failed || env.Type != wire.TypeError || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("a refused message: %+v %v after %v", env, failed, time.Since(start))
		}
	})
}

// TestForgottenCallNameNotReused: a call forgotten after two minutes
// while the same host is still connected keeps its name taken, so a new
// call of the same name is sent to the host under another one, and the
// host's late answer to the old call never reaches the new one. The agent
// whose call was forgotten is told.
func TestForgottenCallNameNotReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, host, ch := studyHost(t)
		defer r.Close()
		agent := ch.localPeer(4 * maxInflight)
		ch.joinAgent(agent, "a")
		drain(agent)
		ch.fromAgent(agent, Envelope{V: wire.Version, Type: wire.TypeToolCall, ID: "x", Payload: toolCall})
		if old := (<-host.replies).Envelope; old.ID != "x" {
			t.Fatalf("the first call went to the host as %q", old.ID)
		}
		for i := range maxInflight / 4 {
			ch.fromAgent(agent, Envelope{V: wire.Version, Type: wire.TypeToolCall, ID: fmt.Sprint("c", i), Payload: toolCall})
		}
		drain(host)
		time.Sleep(2*time.Minute + time.Second)
		ch.fromAgent(agent, Envelope{V: wire.Version, Type: wire.TypeToolCall, ID: "x", Payload: toolCall})
		again := (<-host.replies).Envelope
		if again.ID == "x" {
			t.Fatal("a new call was sent to the host under the name of a forgotten call it may still answer")
		}
		told := 0
		for len(agent.replies) > 0 {
			if m := <-agent.replies; m.Type == wire.TypeError && m.ReplyTo == "x" {
				told++
			}
		}
		if told != 1 {
			t.Fatalf("the agent of the forgotten call x was told %d times, want once", told)
		}
		ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeToolResult, ReplyTo: "x", Payload: json.RawMessage(`{"ok":"late"}`)})
		select {
		case m := <-agent.replies:
			t.Fatalf("the host's late answer to the forgotten call reached the agent: %+v", m)
		default:
		}
		ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeToolResult, ReplyTo: again.ID, Payload: json.RawMessage(`{"ok":"new"}`)})
		if m := <-agent.replies; m.ReplyTo != "x" || string(m.Payload) != `{"ok":"new"}` {
			t.Fatalf("the new call's answer arrived as %+v", m)
		}
	})
}
