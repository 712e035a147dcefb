package agui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tmaxmax/go-sse"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// A frontend that goes away, on synctest's clock: an AG-UI frontend is
// connected only while a run is open, so the thread learns it is gone
// when its run is cut off (the client disconnected) or when a tool call
// waits for it and no run comes within FrontendGrace.

const grace = 10 * time.Second

// agent is the relay's in-process agent of thread "th" with an active
// study session, as the MCP bridge's calls are.
type agent struct {
	t    *testing.T
	data string // the data directory, with the study logs
	r    *relay.Relay
	h    *Handler
	l    *relay.Local
}

func newAgent(t *testing.T) *agent {
	t.Helper()
	data := t.TempDir()
	logs, err := studylog.Open(data, studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := relay.New(relay.Options{Logs: logs})
	h := New(Options{Relay: r, FrontendGrace: grace})
	a := &agent{t: t, data: data, r: r, h: h, l: r.Local("tok", "th")}
	t.Cleanup(func() { a.l.Close(); h.Close(); _ = r.Close() })
	return a
}

// post serves one run of thread "th" to its end and returns its events.
func (a *agent) post(ctx context.Context, runID string, messages ...map[string]any) []map[string]any {
	b, _ := json.Marshal(map[string]any{"threadId": "th", "runId": runID, "messages": append([]map[string]any{}, messages...),
		"tools": []map[string]any{{"name": "change_background", "parameters": map[string]any{"type": "object"}}}})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/agui", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer tok")
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	var evs []map[string]any
	for e, err := range sse.Read(rec.Body, nil) {
		if err != nil {
			a.t.Fatal(err)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
			a.t.Fatalf("event %q: %v", e.Data, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// startSession starts the study session (the thread is the host by now).
func (a *agent) startSession() {
	rep, err := a.l.Request(a.t.Context(), wire.TypeSessionStart, json.RawMessage(`{}`))
	if err != nil || rep.Type != wire.TypeSessionStarted {
		a.t.Fatalf("session.start: %+v %v", rep, err)
	}
}

// call calls the frontend tool with the 20 s the Connect service allows.
func (a *agent) call() <-chan relay.Reply {
	out := make(chan relay.Reply, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rep, err := a.l.Request(ctx, wire.TypeToolCall, json.RawMessage(`{"toolName":"change_background","params":{"color":"blue"},"reason":"asked"}`))
		if err != nil {
			rep = relay.Reply{Envelope: relay.Envelope{Type: "timeout", Payload: json.RawMessage(`{"message":` + `"` + err.Error() + `"}`)}}
		}
		out <- rep
	}()
	return out
}

func (a *agent) online() bool {
	on, _, _ := a.r.Status("tok", "th")
	return on
}

func evTypes(evs []map[string]any) string {
	var s []string
	for _, e := range evs {
		s = append(s, e["type"].(string))
	}
	return strings.Join(s, " ")
}

// phaseOne opens a run, starts the study session in it and has the agent
// call the tool: the run ends after the call's events.
func (a *agent) phaseOne() (<-chan relay.Reply, string) {
	evs := make(chan []map[string]any, 1)
	go func() {
		evs <- a.post(context.Background(), "r1", map[string]any{"id": "u1", "role": "user", "content": "blue"})
	}()
	synctest.Wait() // the run waits for the agent
	a.startSession()
	res := a.call()
	got := <-evs
	if evTypes(got) != "RUN_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED" {
		a.t.Fatalf("phase one: %s", evTypes(got))
	}
	return res, got[1]["toolCallId"].(string)
}

// TestFrontendGoneAfterPhaseOne: the frontend got the tool call and never
// came back with its result. Within the grace the call waits and the
// thread is the host; at the grace the call fails with a sentence that
// says what happened (not the Connect service's timeout, which would come
// later), and the thread is no longer a live host.
func TestFrontendGoneAfterPhaseOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		res, _ := a.phaseOne()
		start := time.Now()

		time.Sleep(grace - time.Second)
		synctest.Wait()
		select {
		case rep := <-res:
			t.Fatalf("the call ended within the grace: %+v", rep)
		default:
		}
		if !a.online() {
			t.Fatal("the thread stopped being the host within the grace")
		}

		rep := <-res
		if waited := time.Since(start); waited != grace {
			t.Errorf("the call ended after %s, want the grace %s", waited, grace)
		}
		msg := string(rep.Payload)
		if rep.Type != wire.TypeError || !strings.Contains(msg, wire.ToolExecutionFailed) ||
			!strings.Contains(msg, `AG-UI frontend of thread \"th\"`) || !strings.Contains(msg, "may or may not") {
			t.Fatalf("the call's answer: %s %s", rep.Type, msg)
		}
		synctest.Wait()
		if a.online() {
			t.Fatal("past the grace the thread is still a live host")
		}
	})
}

// TestFrontendGoneMidRun: the frontend's run is cut off (the page closed)
// and a tool call comes after: it never reaches a frontend, and at the
// grace it fails saying the action did not happen; the thread is no
// longer a live host.
func TestFrontendGoneMidRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		ctx, cut := context.WithCancel(context.Background())
		done := make(chan []map[string]any, 1)
		go func() { done <- a.post(ctx, "r1", map[string]any{"id": "u1", "role": "user", "content": "hi"}) }()
		synctest.Wait()
		a.startSession()
		cut()
		if evs := <-done; evTypes(evs) != "RUN_STARTED" {
			t.Fatalf("cut-off run: %s", evTypes(evs))
		}
		start := time.Now()
		res := a.call()
		rep := <-res
		if waited := time.Since(start); waited != grace {
			t.Errorf("the call ended after %s, want the grace %s", waited, grace)
		}
		msg := string(rep.Payload)
		if rep.Type != wire.TypeError || !strings.Contains(msg, `AG-UI frontend of thread \"th\"`) || !strings.Contains(msg, "did not happen") {
			t.Fatalf("the call's answer: %s %s", rep.Type, msg)
		}
		synctest.Wait()
		if a.online() {
			t.Fatal("past the grace the thread is still a live host")
		}
		// The study log says what happened, in order.
		files, _ := filepath.Glob(filepath.Join(a.data, studylog.RelDir, "*.jsonl"))
		if len(files) != 1 {
			t.Fatalf("study logs %v", files)
		}
		b, _ := os.ReadFile(files[0])
		var seq []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var ev struct{ Direction, Type string }
			_ = json.Unmarshal([]byte(line), &ev)
			seq = append(seq, ev.Direction+" "+ev.Type)
		}
		want := "in session.start|out session.started|internal agui.run.lost|in tool.call|internal error|internal relay.host.left"
		if strings.Join(seq, "|") != want || !strings.Contains(string(b), "did not happen") {
			t.Fatalf("study log\n got %s\nwant %s\n%s", strings.Join(seq, "|"), want, b)
		}
	})
}

// TestFrontendCutOffWithoutCalls: a run cut off with nothing waiting on
// the frontend: the thread stays the host for the grace (a reload), then
// stops counting as one.
func TestFrontendCutOffWithoutCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		ctx, cut := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.post(ctx, "r1") }()
		synctest.Wait()
		cut()
		<-done
		time.Sleep(grace - time.Second)
		synctest.Wait()
		if !a.online() {
			t.Fatal("the thread stopped being the host within the grace")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if a.online() {
			t.Fatal("past the grace the thread is still a live host")
		}
	})
}

// TestFrontendBackWithinGrace: phase two just inside the grace delivers
// the result, and the thread stays the host past the grace.
func TestFrontendBackWithinGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		res, id := a.phaseOne()
		time.Sleep(grace - time.Second)
		ctx, cut := context.WithCancel(context.Background())
		defer cut()
		go a.post(ctx, "r2", map[string]any{"id": "t1", "role": "tool", "toolCallId": id, "content": "ok"})
		rep := <-res
		if rep.Type != wire.TypeToolResult || !strings.Contains(string(rep.Payload), `"ok":true`) {
			t.Fatalf("the call's answer: %s %s", rep.Type, rep.Payload)
		}
		time.Sleep(2 * grace)
		synctest.Wait()
		if !a.online() {
			t.Fatal("a frontend that came back stopped being the host")
		}
		cut()
	})
}

// TestQuietRunKeepsAlive: a run whose agent works a long time in silence
// writes an SSE comment every keepAliveEvery, so a proxy does not cut it;
// the comments are no events, and the run ends as it would have.
func TestQuietRunKeepsAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t)
		b, _ := json.Marshal(map[string]any{"threadId": "th", "runId": "r1",
			"messages": []map[string]any{{"id": "u1", "role": "user", "content": "think about it"}}})
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/agui", strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		served := make(chan struct{})
		go func() { a.h.ServeHTTP(rec, req); close(served) }()
		if _, ok := a.l.NextUserMessage(context.Background()); !ok {
			t.Fatal("no message")
		}
		time.Sleep(3*keepAliveEvery + time.Second) // the agent thinks
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go a.l.NextUserMessage(ctx) // then yields the turn
		<-served
		body := rec.Body.String()
		if n := strings.Count(body, ": keep-alive\n"); n != 3 {
			t.Errorf("%d keep-alive comments in 3 quiet intervals, want 3:\n%s", n, body)
		}
		var types []string
		for e, err := range sse.Read(strings.NewReader(body), nil) {
			if err != nil {
				t.Fatal(err)
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
				t.Fatalf("event %q: %v", e.Data, err)
			}
			types = append(types, ev["type"].(string))
		}
		if got := strings.Join(types, " "); got != "RUN_STARTED RUN_FINISHED" {
			t.Errorf("events %s", got)
		}
	})
}
