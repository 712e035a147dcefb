package srv_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/agui"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// newAGUIServer serves the whole server with the AG-UI options ao.
func newAGUIServer(t *testing.T, ao agui.Options) string {
	t.Helper()
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := studylog.Open(t.TempDir(), studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks, StudyLogs: logs, AGUI: ao})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts.URL
}

// TestAGUIFloodOfAnotherToken: token B floods /agui with requests for
// new threads (results for calls nobody made, then valid runs) while
// token A's thread has a tool call waiting for its frontend's phase two.
// B's refused requests leave no thread and no relay session behind, B's
// valid ones cost only B's own threads, and A's call gets its result.
func TestAGUIFloodOfAnotherToken(t *testing.T) {
	const limit = 4
	url := newAGUIServer(t, agui.Options{MaxThreadsPerToken: limit, FrontendGrace: time.Minute})
	ui := uiRelayClient(url) // token A's agent
	ctx := context.Background()
	const thread = "victim"

	run1 := postAGUI(t, url, tokA, map[string]any{"threadId": thread, "runId": "r1", "tools": bgTool,
		"messages": []map[string]any{{"id": "u1", "role": "user", "content": "blue"}}})
	run1.event()
	if um, err := ui.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: thread, TimeoutMs: 5000}); err != nil || !um.GetReceived() {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
	if r, err := ui.StartSession(ctx, &pb.StartSessionRequest{RelaySession: thread}); err != nil || r.GetError() != nil {
		t.Fatalf("start_session = %v, %v", r, err)
	}
	type callOut struct {
		r   *pb.CallUIToolResponse
		err error
	}
	called := make(chan callOut, 1)
	go func() {
		r, err := ui.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: thread, ToolName: "change_background", ParamsJson: `{"color":"blue"}`, Reason: "asked"})
		called <- callOut{r, err}
	}()
	evs := run1.until()
	if types(evs) != "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED" {
		t.Fatalf("phase one: %s", types(evs))
	}
	callID := evs[0]["toolCallId"].(string)
	sessions := relaySessions(t, url)

	// Results for calls nobody made, each in a new thread: refused, and
	// nothing is left of them.
	for i := range 3 * limit {
		bad := postAGUI(t, url, tokB, map[string]any{"threadId": fmt.Sprint("flood", i), "runId": "r",
			"messages": []map[string]any{{"role": "tool", "toolCallId": "nope", "content": "x"}}})
		if evs := bad.until(); types(evs) != "RUN_STARTED RUN_ERROR" || evs[1]["code"] != "invalid_tool_result" {
			t.Fatalf("flood %d: %v", i, evs)
		}
	}
	if got := relaySessions(t, url); got != sessions {
		t.Errorf("refused requests left relay sessions: %v, were %v", got, sessions)
	}
	// Valid runs of new threads: B's own threads make room for them.
	for i := range 3 * limit {
		ok := postAGUI(t, url, tokB, map[string]any{"threadId": fmt.Sprint("busy", i), "runId": "r"})
		if ev := ok.event(); ev["type"] != "RUN_STARTED" {
			t.Fatalf("valid run %d: %v", i, ev)
		}
		ok.resp.Body.Close() // the frontend goes away mid-run
	}

	select {
	case c := <-called:
		t.Fatalf("token B's flood ended token A's call: %v %v", c.r, c.err)
	default:
	}
	st, err := ui.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: thread})
	if err != nil || !st.GetState().GetHostOnline() {
		t.Fatalf("token A's thread is no longer the host: %v %v", st, err)
	}
	run2 := postAGUI(t, url, tokA, map[string]any{"threadId": thread, "runId": "r2", "tools": bgTool,
		"messages": []map[string]any{{"role": "tool", "toolCallId": callID, "content": "blue now"}}})
	if ev := run2.event(); ev["type"] != "RUN_STARTED" {
		t.Fatalf("phase two: %v", ev)
	}
	c := <-called
	if c.err != nil || c.r.GetError() != nil || !strings.Contains(c.r.GetResultJson(), "blue now") {
		t.Fatalf("call_ui_tool = %v, %v", c.r, c.err)
	}
}

// TestAGUILatestRunsTools: the tools of a thread's latest run are the
// agent's tools: one an earlier run declared and the latest does not is
// no longer among them.
func TestAGUILatestRunsTools(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	ui := uiRelayClient(url)
	ctx := context.Background()
	paint := []map[string]any{{"name": "paint", "parameters": map[string]any{"type": "object"}}}
	for i, tools := range [][]map[string]any{bgTool, paint} {
		run := postAGUI(t, url, tokA, map[string]any{"threadId": "th", "runId": fmt.Sprint("r", i), "tools": tools})
		run.event()
		if _, err := ui.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: "th", TimeoutMs: 100}); err != nil {
			t.Fatal(err)
		}
		if got := types(run.until()); got != "RUN_FINISHED" {
			t.Fatalf("run %d: %s", i, got)
		}
	}
	st, err := ui.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: "th"})
	if err != nil {
		t.Fatal(err)
	}
	if all := st.GetState().GetAllToolsJson(); !strings.Contains(all, `"paint"`) || strings.Contains(all, "change_background") {
		t.Fatalf("the agent's tools after a run that declared only paint: %s", all)
	}
}

// TestNoHostNamesEveryKindOfUI: start_session in a relay session with no
// host says which UIs can be its host, not only the booking page.
func TestNoHostNamesEveryKindOfUI(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	ui := uiRelayClient(url)
	r, err := ui.StartSession(context.Background(), &pb.StartSessionRequest{RelaySession: "th"})
	if err != nil {
		t.Fatal(err)
	}
	msg := r.GetError().GetMessage()
	for _, want := range []string{`relay session "th"`, "booking page", `AG-UI frontend on thread "th"`, `Ingress client on session "th"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("start_session with no host: %q lacks %q", msg, want)
		}
	}
}

// TestReplacedSaysWhatTookOver: a booking page whose relay session an
// AG-UI thread takes over is told so in relay.replaced ("by": "agui").
func TestReplacedSaysWhatTookOver(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := dialAgent(t, url)
	h.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"host","sessionId":"th","token":"` + tokA + `"}}`)
	h.expect("relay.joined")
	run := postAGUI(t, url, tokA, map[string]any{"threadId": "th", "runId": "r1"})
	run.event()
	rep := h.expect("relay.replaced")
	p := rep["payload"].(map[string]any)
	if p["by"] != "agui" || !strings.Contains(fmt.Sprint(p["reason"]), `AG-UI frontend on thread "th"`) {
		t.Fatalf("relay.replaced = %v", rep)
	}
}

// TestAGUIMethodAndType: GET /agui is 405 with Allow: POST (not the web
// UI), a body that is not JSON by its Content-Type 415.
func TestAGUIMethodAndType(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	for _, c := range []struct {
		method, ctype string
		code          int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPut, "application/json", http.StatusMethodNotAllowed},
		{http.MethodPost, "text/plain", http.StatusUnsupportedMediaType},
		{http.MethodPost, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{http.MethodPost, "application/json; charset=utf-8", http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, url+"/agui?token="+tokA, strings.NewReader(`{"threadId":"mt","runId":"r"}`))
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != c.code {
			t.Errorf("%s %q: %d, want %d", c.method, c.ctype, resp.StatusCode, c.code)
		}
		if c.code == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("%s: Allow = %q", c.method, resp.Header.Get("Allow"))
		}
	}
}

// TestAGUIToolNames: a run's tool named a.b is the agent's a_b (as an
// Ingress client's is) and reaches the frontend under its own name; one
// the MCP bridge cannot list under its own name (it shadows a bridge
// tool, or has other characters) is still reachable through
// call_ui_tool, and the run tells the frontend so in a CUSTOM event.
func TestAGUIToolNames(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	ui := uiRelayClient(url)
	ctx := context.Background()
	obj := map[string]any{"type": "object"}
	tools := []map[string]any{{"name": "page.paint", "parameters": obj}, {"name": "get_ui_state", "parameters": obj}, {"name": "paint it", "parameters": obj}}
	run := postAGUI(t, url, tokA, map[string]any{"threadId": "tn", "runId": "r1", "tools": tools})
	if ev := run.event(); ev["type"] != "RUN_STARTED" {
		t.Fatalf("first event %v", ev)
	}
	notice := run.event()
	if notice["type"] != "CUSTOM" || notice["name"] != "agentassistant.tool_names" {
		t.Fatalf("second event %v", notice)
	}
	val := fmt.Sprint(notice["value"])
	for _, want := range []string{"page.paint", "page_paint", "get_ui_state", "paint it", "call_ui_tool"} {
		if !strings.Contains(val, want) {
			t.Errorf("the notice %s lacks %q", val, want)
		}
	}
	if r, err := ui.StartSession(ctx, &pb.StartSessionRequest{RelaySession: "tn"}); err != nil || r.GetError() != nil {
		t.Fatalf("start_session = %v, %v", r, err)
	}
	st, _ := ui.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: "tn"})
	if all := st.GetState().GetAllToolsJson(); !strings.Contains(all, `"page_paint"`) || strings.Contains(all, `"page.paint"`) {
		t.Fatalf("the agent's tools: %s", all)
	}
	for i, c := range []struct{ call, frontend string }{{"page_paint", "page.paint"}, {"get_ui_state", "get_ui_state"}, {"paint it", "paint it"}} {
		done := make(chan *pb.CallUIToolResponse, 1)
		go func() {
			r, err := ui.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: "tn", ToolName: c.call, ParamsJson: `{}`, Reason: "test"})
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		evs := run.until()
		if types(evs) != "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED" || evs[0]["toolCallName"] != c.frontend {
			t.Fatalf("%s: %v", c.call, evs)
		}
		run = postAGUI(t, url, tokA, map[string]any{"threadId": "tn", "runId": fmt.Sprint("r", i+2), "tools": tools,
			"messages": []map[string]any{{"role": "tool", "tool_id": evs[0]["toolCallId"], "tool_name": c.frontend, "content": "done"}}})
		run.event()
		run.event() // the notice again
		if r := <-done; r.GetError() != nil || !strings.Contains(r.GetResultJson(), "done") {
			t.Fatalf("%s: %v", c.call, r)
		}
	}
}

// TestReplacedByIngress: a page replaced by an Ingress client of the same
// relay session is told an Ingress client took over.
func TestReplacedByIngress(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	h := dialAgent(t, url)
	h.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"host","sessionId":"default","token":"` + tokA + `"}}`)
	h.expect("relay.joined")
	ingressHello(t, url, tokA) // no client_meta.session: "default"
	rep := h.expect("relay.replaced")
	if p := rep["payload"].(map[string]any); p["by"] != "ingress" {
		t.Fatalf("relay.replaced = %v", rep)
	}
}
