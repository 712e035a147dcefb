package relay

import (
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// inbox is an agent that is neither in-process nor a socket (as an agent
// on /agent/ws, its calls have the relay's deadline): it keeps what it is
// sent.
type inbox struct {
	mu   sync.Mutex
	envs []Envelope
}

func (b *inbox) Deliver(env Envelope) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.envs = append(b.envs, env)
	return true
}

// errors returns the error envelopes received so far.
func (b *inbox) errors() []Envelope {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Envelope
	for _, e := range b.envs {
		if e.Type == wire.TypeError {
			out = append(out, e)
		}
	}
	return out
}

// TestCallDeadline: an agent's tool.call the host does not answer is
// answered by the relay exactly at CallTimeout, not before, with
// TOOL_EXECUTION_FAILED to the agent's id; its id stays taken for the
// host's late answer, which reaches no one. An answer in time stops the
// deadline; agent.message, which has no answer, has none.
func TestCallDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, host, ch := studyHost(t)
		defer r.Close()
		const timeout = DefaultCallTimeout
		b := &inbox{}
		agent := &External{d: b}
		ch.joinAgent(agent, "a")

		ch.fromAgent(agent, Envelope{V: wire.Version, Type: wire.TypeToolCall, ID: "late", Payload: toolCall})
		call := (<-host.replies).Envelope
		ch.fromAgent(agent, Envelope{V: wire.Version, Type: wire.TypeAgentMessage, ID: "m", Payload: json.RawMessage(`{"text":"hi"}`)})
		drain(host)
		time.Sleep(timeout - time.Nanosecond)
		synctest.Wait()
		if errs := b.errors(); len(errs) != 0 {
			t.Fatalf("before the deadline the agent got %+v", errs)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		errs := b.errors()
		if len(errs) != 1 || errs[0].ReplyTo != "late" {
			t.Fatalf("at the deadline the agent got %+v, want one error to its call", errs)
		}
		var e Error
		if err := json.Unmarshal(errs[0].Payload, &e); err != nil || e.Code != wire.ToolExecutionFailed {
			t.Fatalf("the deadline's error: %s", errs[0].Payload)
		}
		ch.mu.Lock()
		_, taken := ch.inflight[call.ID]
		ch.mu.Unlock()
		if !taken {
			t.Fatal("the id of a call still with the host was freed at the deadline")
		}
		ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeToolResult, ReplyTo: call.ID, Payload: json.RawMessage(`{"ok":true}`)})
		drain(host)

		// Answered in time: no deadline follows.
		ch.fromAgent(agent, Envelope{V: wire.Version, Type: wire.TypeToolCall, ID: "quick", Payload: toolCall})
		call = (<-host.replies).Envelope
		time.Sleep(timeout / 2)
		ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeToolResult, ReplyTo: call.ID, Payload: json.RawMessage(`{"ok":true}`)})
		time.Sleep(timeout)
		synctest.Wait()
		if errs := b.errors(); len(errs) != 1 {
			t.Fatalf("the agent got %+v: an error for the late answer, the call answered in time or the agent.message", errs[1:])
		}
	})
}
