package srv_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// postAGUIRaw posts body to /agui and returns the status and, for a
// refusal, the body (a run's stream is left unread and closed).
func postAGUIRaw(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/agui", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tokA)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAGUIRefusesAmbiguousJSON: a RunAgentInput with a key given twice
// (at any depth, in state, in a message, spelt with escapes), with a
// tool result whose JSON text gives a key twice, or with a number no
// float64 holds, is refused with 400 saying what is wrong; no run
// starts, and neither the state nor the result reaches the agent.
func TestAGUIRefusesAmbiguousJSON(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{})
	const thread = "strict"
	a := joinAgent(t, url, tokA, thread)

	refused := func(what, body, want string) {
		t.Helper()
		code, msg := postAGUIRaw(t, url, body)
		if code != http.StatusBadRequest || !strings.Contains(msg, want) || strings.Contains(msg, "SECRET") {
			t.Fatalf("%s: %d %q, want 400 saying %q", what, code, msg, want)
		}
	}
	for _, c := range ambiguous {
		want := "more than once"
		switch {
		case strings.Contains(c.name, "overflow"):
			want = "does not fit a 64-bit float"
		case strings.Contains(c.name, "long"):
			want = "characters (at most"
		}
		refused("state, "+c.name, `{"threadId":"strict","runId":"r","state":`+c.json+`}`, want)
	}
	refused("the issue's state", `{"threadId":"strict","runId":"r","state":{"form":{"backendData":"SECRET"},"form":{"v":1}}}`, `"form"`)
	refused("threadId twice", `{"threadId":"a","threadId":"b","runId":"r"}`, `"threadId" is given more than once`)
	refused("escaped threadId", `{"threadId":"a","thread\u0049d":"b","runId":"r"}`, `"threadId" is given more than once`)
	refused("in a message", `{"threadId":"strict","runId":"r","messages":[{"id":"u","role":"user","content":"hi","content":"SECRET"}]}`, `"content"`)
	refused("state 1e999999", `{"threadId":"strict","runId":"r","state":{"n":1e999999}}`, "does not fit a 64-bit float")
	refused("state of a 3.8 MiB number", `{"threadId":"strict","runId":"r","state":{"n":`+strings.Repeat("1", 3900<<10)+`}}`, "characters (at most")

	// A tool result: the frontend's phase two for a call the agent waits on.
	ui := uiRelayClient(url)
	ctx := context.Background()
	run1 := postAGUI(t, url, tokA, map[string]any{"threadId": thread, "runId": "run-1", "tools": bgTool,
		"messages": []map[string]any{{"id": "u1", "role": "user", "content": "make it blue"}}})
	if _, err := ui.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: thread, TimeoutMs: 5000}); err != nil {
		t.Fatal(err)
	}
	if ss, err := ui.StartSession(ctx, &pb.StartSessionRequest{RelaySession: thread}); err != nil || ss.GetError() != nil {
		t.Fatalf("start_session = %v, %v", ss, err)
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
	callID, _ := evs[len(evs)-2]["toolCallId"].(string)
	if callID == "" {
		t.Fatalf("run 1: %v", evs)
	}
	result := func(content string) string {
		b, _ := json.Marshal(map[string]any{"threadId": thread, "runId": "run-2", "tools": bgTool,
			"messages": []map[string]any{{"role": "tool", "toolCallId": callID, "content": content}}})
		return string(b)
	}
	for _, c := range ambiguous {
		refused("tool result, "+c.name, result(c.json), "messages[0].content")
	}
	refused("tool message twice", `{"threadId":"strict","runId":"run-2","messages":[{"role":"tool","toolCallId":"`+callID+
		`","content":"{\"ok\":1}","content":"{\"backendData\":\"SECRET\"}"}]}`, `"content" is given more than once`)
	select {
	case c := <-called:
		t.Fatalf("a refused result reached the call: %v %v", c.r, c.err)
	default:
	}
	run2 := postAGUI(t, url, tokA, map[string]any{"threadId": thread, "runId": "run-2", "tools": bgTool, "state": map[string]any{"mark": "good"},
		"messages": []map[string]any{{"role": "tool", "toolCallId": callID, "content": `{"status":"ok"}`}}})
	run2.event()
	c := <-called
	if c.err != nil || c.r.GetError() != nil || !strings.Contains(c.r.GetResultJson(), `"status":"ok"`) || strings.Contains(c.r.String(), "SECRET") {
		t.Fatalf("call_ui_tool = %v, %v", c.r, c.err)
	}
	// The agent on /agent/ws saw the runs' states, none of the refused ones.
	for {
		m := a.until("state.updated")
		b, _ := json.Marshal(m)
		if strings.Contains(string(b), "SECRET") {
			t.Fatalf("the agent got %s", b)
		}
		if strings.Contains(string(b), `"good"`) {
			break
		}
	}
}
