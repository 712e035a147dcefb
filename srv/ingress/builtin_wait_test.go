package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// The built-in orchestrator on synctest's clock, driven as the Handler
// drives it: Invoke on a goroutine, the agent as the relay's in-process
// agent of relay session "th" (what the MCP bridge's calls are).

type builtinRun struct {
	evs chan ingress.Event
	id  chan string
	err chan error
}

func newBuiltin(t *testing.T) (*ingress.Builtin, ingress.SessionInfo, *relay.Local) {
	t.Helper()
	logs, err := studylog.Open(t.TempDir(), studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := relay.New(relay.Options{Logs: logs})
	b := ingress.NewBuiltin(ingress.BuiltinOptions{Relay: r})
	info := ingress.SessionInfo{Token: "tok", SessionID: "sess_1", UserID: "u1",
		Meta: ingress.ClientMeta{Session: "th", Tools: []ingress.ClientTool{{Name: "shot"}}}}
	b.OpenSession(info)
	l := r.Local("tok", "th")
	t.Cleanup(func() { l.Close(); b.Close(); _ = r.Close() })
	return b, info, l
}

func invokeBuiltin(b *ingress.Builtin, info ingress.SessionInfo, text string) *builtinRun {
	run := &builtinRun{evs: make(chan ingress.Event, 16), id: make(chan string, 1), err: make(chan error, 1)}
	req := ingress.InvokeRequest{Session: info, SessionID: info.SessionID, UserID: info.UserID, Message: ingress.ChatMessage{Role: "user", Content: text}}
	go func() {
		run.err <- b.Invoke(context.Background(), req, func(id string) { run.id <- id }, func(ev ingress.Event) { run.evs <- ev })
	}()
	return run
}

// TestBuiltinAgentWaitIsBounded: with no agent, the run ends exactly
// DefaultAgentWait after it started, with state NO_AGENT and
// orchestrator_error; the message stays for the agent that comes.
func TestBuiltinAgentWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, info, l := newBuiltin(t)
		start := time.Now()
		run := invokeBuiltin(b, info, "anyone?")
		id := <-run.id
		if err := <-run.err; err != nil {
			t.Fatalf("Invoke = %v", err)
		}
		if waited := time.Since(start); waited != ingress.DefaultAgentWait {
			t.Errorf("the run ended after %s, want %s", waited, ingress.DefaultAgentWait)
		}
		st, er := <-run.evs, <-run.evs
		if st.Type != wire.IngressState || st.State != wire.IngressStateNoAgent || st.RunID != id {
			t.Fatalf("first event %+v", st)
		}
		if er.Type != wire.IngressError || er.Code != wire.IngressOrchestratorError || er.RunID != id || !strings.Contains(er.Message, `relay session "th"`) {
			t.Fatalf("second event %+v", er)
		}
		env, ok := l.NextUserMessage(context.Background())
		if !ok || !strings.Contains(string(env.Payload), "anyone?") {
			t.Fatalf("the message was not kept: %s", env.Payload)
		}
	})
}

// TestBuiltinBusyAgentKeepsTheRun: an agent that took the message may
// take its time: the run is open past the wait and ends when it yields.
func TestBuiltinBusyAgentKeepsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, info, l := newBuiltin(t)
		run := invokeBuiltin(b, info, "think hard")
		<-run.id
		if _, ok := l.NextUserMessage(context.Background()); !ok {
			t.Fatal("no message")
		}
		time.Sleep(3 * ingress.DefaultAgentWait)
		synctest.Wait()
		select {
		case ev := <-run.evs:
			t.Fatalf("the run sent %+v while the agent worked", ev)
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go l.NextUserMessage(ctx) // it yields the turn
		if ev := <-run.evs; ev.Type != wire.IngressDone {
			t.Fatalf("event %+v, want done", ev)
		}
		if err := <-run.err; err != nil {
			t.Fatalf("Invoke = %v", err)
		}
	})
}

// TestBuiltinCancelledRunRefusesTheAgent: from Cancel on, before the run
// has even ended, a message of the agent is refused saying the run was
// cancelled (not taken as posted and dropped), and a call of a client
// tool is answered so (not left waiting): nothing is streamed.
func TestBuiltinCancelledRunRefusesTheAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, info, l := newBuiltin(t)
		run := invokeBuiltin(b, info, "go")
		id := <-run.id
		if _, ok := l.NextUserMessage(context.Background()); !ok {
			t.Fatal("no message")
		}
		if err := b.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		env, failed := l.Post(context.Background(), wire.TypeAgentMessage, json.RawMessage(`{"text":"too late"}`), time.Second)
		if !failed || !strings.Contains(string(env.Payload), "run "+id+" was cancelled") {
			t.Fatalf("agent.message after Cancel: %s (refused %v)", env.Payload, failed)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rep, err := l.Request(ctx, wire.TypeToolCall, json.RawMessage(`{"toolName":"shot","params":{},"reason":"r"}`))
		if err != nil || !strings.Contains(string(rep.Payload), "run "+id+" was cancelled") || !strings.Contains(string(rep.Payload), `"ok":false`) {
			t.Fatalf("tool.call after Cancel: %s, %v", rep.Payload, err)
		}
		if err := <-run.err; err == nil {
			t.Fatal("Invoke of a cancelled run returned nil")
		}
		select {
		case ev := <-run.evs:
			t.Fatalf("the cancelled run streamed %+v", ev)
		default:
		}
	})
}
