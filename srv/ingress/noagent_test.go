package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestBuiltinNoAgent: a run of the built-in orchestrator whose relay
// session no agent waits on does not hang after run_started: past the
// agent wait it ends with a state NO_AGENT and the seed's
// orchestrator_error (retryable), naming the relay session and how to
// connect an agent. The message is kept: an agent that comes later gets
// it, and is told that what it answers has no run to go to; the device
// gets nothing of it, and its next agent_invoke opens a run.
func TestBuiltinNoAgent(t *testing.T) {
	e := newEnv(t, false, ingress.Options{AgentWait: 50 * time.Millisecond}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	c.hello("u1", `"client_meta":{"app":"web","session":"lonely-nobody"}`)
	c.send(strings.Replace(invokeWith("帮我查询今天的天气"), "sess_001", c.sess, 1))
	run := str(c.expect("run_started"), "run_id")
	st := c.expect("state")
	var detail map[string]any
	_ = json.Unmarshal([]byte(mustJSON(t, st["detail"])), &detail)
	if str(st, "state") != "NO_AGENT" || str(st, "run_id") != run || detail["relay_session"] != "lonely-nobody" || detail["message_kept"] != true {
		t.Fatalf("state %v", st)
	}
	er := c.expectError("orchestrator_error")
	msg := str(er, "message")
	if str(er, "run_id") != run {
		t.Fatalf("error %v does not name run %s", er, run)
	}
	for _, want := range []string{`relay session "lonely-nobody"`, relay.ConnectAgent("lonely-nobody"), "kept", "agent_invoke again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error message %q lacks %q", msg, want)
		}
	}

	// An agent that comes later gets the message.
	agent := agentClient(e.url)
	ctx := context.Background()
	um, err := agent.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: "lonely-nobody", TimeoutMs: 10000})
	if err != nil || !um.GetReceived() || um.GetText() != "帮我查询今天的天气" || !strings.Contains(um.GetPayloadJson(), run) {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
	// What it answers has no run: it is told so, naming the run.
	r, err := agent.PostAgentMessage(ctx, &pb.AgentMessageRequest{RelaySession: "lonely-nobody", Text: "晴"})
	if err != nil || r.GetError() == nil || !strings.Contains(r.GetError().GetMessage(), run) ||
		!strings.Contains(r.GetError().GetMessage(), "before an agent took its message") {
		t.Fatalf("send_agent_message after the run ended = %v, %v", r, err)
	}
	// Nothing reached the device; its next invoke opens a run.
	c.send(strings.Replace(strings.Replace(invokeWith("再问一次"), "sess_001", c.sess, 1), "req_abc123", "req_2", 1))
	if rs := c.expect("run_started"); str(rs, "run_id") == run {
		t.Fatalf("run_started %v", rs)
	}
}

// TestBuiltinCancelTellsTheAgent: after cancel_run (state CANCELLED,
// done), the agent that took the run's message is told the run was
// cancelled when it sends a message or calls a client tool, and nothing
// reaches the device.
func TestBuiltinCancelTellsTheAgent(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	agent := agentClient(e.url)
	ctx := context.Background()
	c := dial(t, e.url)
	c.hello("u1", toolsMeta)
	c.send(strings.Replace(invokeWith("截个图"), "sess_001", c.sess, 1))
	run := str(c.expect("run_started"), "run_id")
	if um, err := agent.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: "desk", TimeoutMs: 10000}); err != nil || !um.GetReceived() {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
	c.send(`{"type":"cancel_run","ts":1,"run_id":"` + run + `"}`)
	if st := c.expect("state"); str(st, "state") != "CANCELLED" {
		t.Fatalf("state %v", st)
	}
	c.expect("done")

	r, err := agent.PostAgentMessage(ctx, &pb.AgentMessageRequest{RelaySession: "desk", Text: "好的"})
	if err != nil || r.GetError() == nil || !strings.Contains(r.GetError().GetMessage(), "run "+run+" was cancelled") {
		t.Fatalf("send_agent_message after cancel_run = %v, %v", r, err)
	}
	tr, err := agent.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: "desk", ToolName: "browser_screenshot", ParamsJson: `{}`, Reason: "the user asked"})
	if err != nil || tr.GetError() == nil || !strings.Contains(tr.GetError().GetMessage(), "run "+run+" was cancelled") {
		t.Fatalf("call_ui_tool after cancel_run = %v, %v", tr, err)
	}
	// get_ui_state says so too.
	st, err := agent.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: "desk", Refresh: true})
	if err != nil || !strings.Contains(st.GetState().GetUiSpecJson(), "run "+run+" was cancelled") {
		t.Fatalf("get_ui_state after cancel_run = %v, %v", st, err)
	}
	// Nothing of it reached the device: the next event is the next run's.
	c.send(strings.Replace(strings.Replace(invokeWith("再来"), "sess_001", c.sess, 1), "req_abc123", "req_2", 1))
	if rs := c.expect("run_started"); str(rs, "run_id") == run {
		t.Fatalf("run_started %v", rs)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
