package srv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tmaxmax/go-sse"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// aguiRun is one POST /agui whose SSE events the test reads, with
// go-sse's reader.
type aguiRun struct {
	t    *testing.T
	resp *http.Response
	next func() (sse.Event, error, bool)
	stop func()
}

func postAGUI(t *testing.T, url, tok string, in any) *aguiRun {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/agui", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /agui: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	a := &aguiRun{t: t, resp: resp}
	a.next, a.stop = iter.Pull2(sse.Read(resp.Body, nil))
	t.Cleanup(a.stop)
	return a
}

// event reads one event.
func (a *aguiRun) event() map[string]any {
	a.t.Helper()
	e, err, ok := a.next()
	if !ok || err != nil {
		a.t.Fatalf("read SSE: %v (more: %v)", err, ok)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
		a.t.Fatalf("event %q: %v", e.Data, err)
	}
	return ev
}

// until reads events up to and including the run's end, and checks the
// stream ends there.
func (a *aguiRun) until() []map[string]any {
	a.t.Helper()
	var evs []map[string]any
	for {
		ev := a.event()
		evs = append(evs, ev)
		if ev["type"] == "RUN_FINISHED" || ev["type"] == "RUN_ERROR" {
			if e, err, ok := a.next(); ok {
				a.t.Fatalf("events after the run's end: %q %v", e.Data, err)
			}
			return evs
		}
	}
}

func types(evs []map[string]any) string {
	var s []string
	for _, e := range evs {
		s = append(s, e["type"].(string))
	}
	return strings.Join(s, " ")
}

var bgTool = []map[string]any{{
	"name": "change_background", "description": "Change the page background",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}},
}}

// TestAGUITwoPhases: an AG-UI thread is the host of its relay session;
// the agent (the MCP bridge's Connect calls) reads the user's message,
// talks, calls the frontend tool (phase one: TOOL_CALL_START, ARGS, END,
// RUN_FINISHED), gets the frontend's result from the next run (phase
// two, by toolCallId, then by the two-phase design's tool_id/tool_name),
// and finishes the run by waiting for the user.
func TestAGUITwoPhases(t *testing.T) {
	url, dataDir := newRelayServer(t, relay.Options{})
	ui := uiRelayClient(url)
	ctx := context.Background()
	const thread = "thread-1"

	msgs := []map[string]any{{"id": "u1", "role": "user", "content": "make it blue"}}
	run1 := postAGUI(t, url, tokA, map[string]any{
		"threadId": thread, "runId": "run-1", "messages": msgs, "tools": bgTool,
		"state": map[string]any{"background": "white"}, "context": []any{}, "forwardedProps": map[string]any{},
	})
	if ev := run1.event(); ev["type"] != "RUN_STARTED" || ev["threadId"] != thread || ev["runId"] != "run-1" {
		t.Fatalf("first event %v", ev)
	}
	um, err := ui.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: thread, TimeoutMs: 5000})
	if err != nil || !um.GetReceived() || um.GetText() != "make it blue" {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
	ss, err := ui.StartSession(ctx, &pb.StartSessionRequest{RelaySession: thread})
	if err != nil || ss.GetError() != nil || ss.GetStudySessionId() == "" {
		t.Fatalf("start_session = %v, %v", ss, err)
	}
	st, err := ui.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: thread, Refresh: true})
	if err != nil || st.GetError() != nil {
		t.Fatalf("get_ui_state = %v, %v", st, err)
	}
	if s := st.GetState(); !strings.Contains(s.GetAllToolsJson(), `"change_background"`) || !strings.Contains(s.GetUiSpecJson(), `"white"`) || !s.GetHostOnline() {
		t.Fatalf("state = %v", s)
	}
	if r, err := ui.PostAgentMessage(ctx, &pb.AgentMessageRequest{RelaySession: thread, Text: "On it."}); err != nil || r.GetError() != nil {
		t.Fatalf("send_agent_message = %v, %v", r, err)
	}
	type callOut struct {
		r   *pb.CallUIToolResponse
		err error
	}
	called := make(chan callOut, 1)
	go func() {
		r, err := ui.CallUITool(ctx, &pb.CallUIToolRequest{
			RelaySession: thread, ToolName: "change_background", ParamsJson: `{"color":"blue"}`, Reason: "the user asked",
		})
		called <- callOut{r, err}
	}()
	evs := run1.until()
	if got, want := types(evs), "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED"; got != want {
		t.Fatalf("run 1 events:\n got %s\nwant %s", got, want)
	}
	if evs[1]["delta"] != "On it." || evs[0]["role"] != "assistant" || evs[0]["messageId"] != evs[2]["messageId"] {
		t.Errorf("text message %v", evs[:3])
	}
	callID, _ := evs[3]["toolCallId"].(string)
	if callID == "" || evs[3]["toolCallName"] != "change_background" || evs[4]["toolCallId"] != callID || evs[5]["toolCallId"] != callID {
		t.Fatalf("tool call events %v", evs[3:6])
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(evs[4]["delta"].(string)), &args); err != nil || args["color"] != "blue" {
		t.Fatalf("TOOL_CALL_ARGS delta %v", evs[4]["delta"])
	}
	select {
	case c := <-called:
		t.Fatalf("the tool call returned before phase two: %v %v", c.r, c.err)
	default:
	}

	// A result for a call nobody made, or naming another tool: RUN_ERROR,
	// and the waiting call is not disturbed.
	hist := append(msgs, map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{
		"id": callID, "type": "function", "function": map[string]any{"name": "change_background", "arguments": `{"color":"blue"}`}}}})
	for name, tm := range map[string]map[string]any{
		"unknown id":    {"id": "t0", "role": "tool", "toolCallId": "no-such-call", "content": "ok"},
		"mismatch name": {"id": "t0", "role": "tool", "tool_id": callID, "tool_name": "delete_everything", "content": "ok"},
	} {
		bad := postAGUI(t, url, tokA, map[string]any{"threadId": thread, "runId": "run-bad", "messages": append(append([]map[string]any{}, hist...), tm), "tools": bgTool})
		evs := bad.until()
		if types(evs) != "RUN_STARTED RUN_ERROR" || evs[1]["code"] != "invalid_tool_result" {
			t.Errorf("%s: %v", name, evs)
		}
		t.Logf("%s: %v", name, evs[1]["message"])
	}
	select {
	case c := <-called:
		t.Fatalf("a bad result reached the call: %v %v", c.r, c.err)
	default:
	}

	// Phase two, in the design's own spelling: only the tool message.
	run2In := map[string]any{"threadId": thread, "runId": "run-2", "tools": bgTool, "state": map[string]any{"background": "blue"},
		"messages": []map[string]any{{"role": "tool", "tool_id": callID, "tool_name": "change_background", "content": `{"status":"ok"}`}}}
	run2 := postAGUI(t, url, tokA, run2In)
	if ev := run2.event(); ev["type"] != "RUN_STARTED" {
		t.Fatalf("run 2 first event %v", ev)
	}
	c := <-called
	if c.err != nil || c.r.GetError() != nil || !strings.Contains(c.r.GetResultJson(), `"status":"ok"`) {
		t.Fatalf("call_ui_tool = %v, %v", c.r, c.err)
	}
	if !strings.Contains(c.r.GetState().GetUiSpecJson(), "blue") {
		t.Errorf("state after the call %v", c.r.GetState())
	}
	if r, err := ui.PostAgentMessage(ctx, &pb.AgentMessageRequest{RelaySession: thread, Text: "Done: the background is blue."}); err != nil || r.GetError() != nil {
		t.Fatalf("send_agent_message = %v, %v", r, err)
	}
	var waiting sync.WaitGroup
	defer waiting.Wait()
	waitUser := func() {
		defer waiting.Done()
		if _, err := ui.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: thread, TimeoutMs: 300}); err != nil {
			t.Error(err)
		}
	}
	waiting.Add(1)
	go waitUser()
	if got, want := types(run2.until()), "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"; got != want {
		t.Fatalf("run 2 events:\n got %s\nwant %s", got, want)
	}

	// The same phase-two request again: nothing is delivered twice and
	// nothing fails; the run ends when the agent yields.
	run2In["runId"] = "run-2-retry"
	retry := postAGUI(t, url, tokA, run2In)
	if ev := retry.event(); ev["type"] != "RUN_STARTED" {
		t.Fatalf("retry first event %v", ev)
	}
	waiting.Add(1)
	go waitUser()
	if got := types(retry.until()); got != "RUN_FINISHED" {
		t.Fatalf("retry events %s", got)
	}

	// A user message in a later run: the agent hears it, then yields.
	waiting.Wait() // the earlier wait is over: it would take the message
	run4 := postAGUI(t, url, tokA, map[string]any{"threadId": thread, "runId": "run-4", "tools": bgTool,
		"messages": []map[string]any{{"id": "u2", "role": "user", "content": "thanks"}}})
	run4.event()
	if um, err := ui.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: thread, TimeoutMs: 5000}); err != nil || um.GetText() != "thanks" {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
	waiting.Add(1)
	go waitUser()
	if got := types(run4.until()); got != "RUN_FINISHED" {
		t.Fatalf("run 4 events %s", got)
	}

	// The study log has the thread's events since start_session, as for
	// an mvp-0.2 host.
	end, err := ui.EndSession(ctx, &pb.EndSessionRequest{RelaySession: thread})
	if err != nil || end.GetError() != nil || end.GetLogFile() == "" {
		t.Fatalf("end_session = %v, %v", end, err)
	}
	logText, err := os.ReadFile(filepath.Join(dataDir, end.GetLogFile()))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"agent.message"`, `"tool.call"`, `"tool.result"`, `"status":"ok"`, `"session.ended"`} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("study log lacks %s:\n%s", want, logText)
		}
	}
	// Every line has the fields of an mvp-0.2 session's log, and the
	// thread's runs are in it with what happened in them.
	var seq []string
	for i, line := range strings.Split(strings.TrimSpace(string(logText)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %d: %v", i, err)
		}
		for _, f := range []string{"sessionId", "eventIndex", "timestamp", "direction", "type", "payload"} {
			if _, ok := ev[f]; !ok {
				t.Errorf("log line %d lacks %s: %s", i, f, line)
			}
		}
		if ev["sessionId"] != ss.GetStudySessionId() || ev["eventIndex"] != float64(i) {
			t.Errorf("log line %d: %s", i, line)
		}
		seq = append(seq, ev["direction"].(string)+" "+ev["type"].(string))
	}
	want := []string{
		"in session.start", "out session.started", "in snapshot.get", "out snapshot.state",
		"in agent.message", "in tool.call", "in agui.run.finished", // run 1, phase one
		"out agui.run.started", "in agui.run.error", "out agui.run.started", "in agui.run.error", // the bad results
		"out agui.run.started", "out state.updated", "out tool.result", "in agent.message", "in agui.run.finished", // phase two
		"out agui.run.started", "out state.updated", "in agui.run.finished", // its retry
		"out agui.run.started", "out state.updated", "out user.message", "in agui.run.finished", // run 4
		"in session.end", "out session.ended",
	}
	if strings.Join(seq, "\n") != strings.Join(want, "\n") {
		t.Errorf("study log:\n%s\nwant:\n%s", strings.Join(seq, "\n"), strings.Join(want, "\n"))
	}
	for _, want := range []string{`"code":"invalid_tool_result"`, `"runId":"run-2"`, `"lastRole":"tool"`, `"tools":["change_background"]`, `"text":"thanks"`} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("study log lacks %s", want)
		}
	}
}

// TestAGUICallWaitsForNextRun: a frontend tool call made while no run is
// open reaches the frontend in its next run.
func TestAGUICallWaitsForNextRun(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	ui := uiRelayClient(url)
	ctx := context.Background()
	run := postAGUI(t, url, tokA, map[string]any{"threadId": "default", "runId": "r1", "messages": []any{}, "tools": bgTool})
	run.event()
	if r, err := ui.StartSession(ctx, &pb.StartSessionRequest{}); err != nil || r.GetError() != nil {
		t.Fatalf("start_session = %v, %v", r, err)
	}
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		ui.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{TimeoutMs: 200})
	}()
	if got := types(run.until()); got != "RUN_FINISHED" {
		t.Fatalf("run 1: %s", got)
	}
	<-waited // the agent stops waiting for the user, and calls a tool
	done := make(chan *pb.CallUIToolResponse, 1)
	go func() {
		r, err := ui.CallUITool(ctx, &pb.CallUIToolRequest{ToolName: "change_background", ParamsJson: `{"color":"red"}`, Reason: "asked"})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	run2 := postAGUI(t, url, tokA, map[string]any{"threadId": "default", "runId": "r2", "messages": []any{}, "tools": bgTool})
	evs := run2.until()
	if got := types(evs); got != "RUN_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED" {
		t.Fatalf("run 2: %s", got)
	}
	run3 := postAGUI(t, url, tokA, map[string]any{"threadId": "default", "runId": "r3", "tools": bgTool,
		"messages": []any{map[string]any{"id": "t1", "role": "tool", "toolCallId": evs[1]["toolCallId"], "content": "red now"}}})
	run3.event()
	if r := <-done; r.GetError() != nil || !strings.Contains(r.GetResultJson(), "red now") {
		t.Fatalf("call_ui_tool = %v", r)
	}
}

// TestAGUIBadInput: what is not a RunAgentInput is refused with 400 and
// a sentence saying what is wrong; too large a body with 413; a second
// run while one is open with RUN_ERROR.
func TestAGUIBadInput(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	for name, c := range map[string]struct {
		body string
		code int
		want string
	}{
		"not json":       {`{"threadId":`, 400, "not valid JSON"},
		"no thread":      {`{"runId":"r","messages":[]}`, 400, "threadId is required"},
		"bad thread":     {`{"threadId":"a/b","runId":"r"}`, 400, "threadId names the relay session"},
		"no run":         {`{"threadId":"t"}`, 400, "runId is required"},
		"messages type":  {`{"threadId":"t","runId":"r","messages":{}}`, 400, "not valid JSON"},
		"bad role":       {`{"threadId":"t","runId":"r","messages":[{"role":"wizard"}]}`, 400, "not an AG-UI role"},
		"tool no id":     {`{"threadId":"t","runId":"r","messages":[{"role":"tool","content":"x"}]}`, 400, "needs toolCallId"},
		"state not obj":  {`{"threadId":"t","runId":"r","state":[1]}`, 400, "state must be an object"},
		"tool no name":   {`{"threadId":"t","runId":"r","tools":[{"description":"x"}]}`, 400, "tools[0].name is required"},
		"trailing":       {`{"threadId":"t","runId":"r"} {}`, 400, "trailing data"},
		"oversized body": {`{"threadId":"t","runId":"r","forwardedProps":"` + strings.Repeat("x", 5<<20) + `"}`, 413, "larger than"},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/agui?token="+tokA, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d %q", name, resp.StatusCode, body, c.code, c.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/agui?token="+tokA, strings.NewReader(`{"threadId":"t","runId":"r"}`))
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Origin: %d", resp.StatusCode)
	}
	open := postAGUI(t, url, tokA, map[string]any{"threadId": "t", "runId": "r1"})
	open.event()
	second := postAGUI(t, url, tokA, map[string]any{"threadId": "t", "runId": "r2"})
	if evs := second.until(); types(evs) != "RUN_STARTED RUN_ERROR" || !strings.Contains(fmt.Sprint(evs[1]["message"]), "run open already") {
		t.Errorf("second run: %v", evs)
	}
	// Another token's thread of the same name is another relay session.
	other := postAGUI(t, url, tokB, map[string]any{"threadId": "t", "runId": "r3"})
	if ev := other.event(); ev["type"] != "RUN_STARTED" {
		t.Errorf("token B: %v", ev)
	}
}
