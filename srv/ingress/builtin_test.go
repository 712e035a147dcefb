package ingress_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/ingress"
)

// agentClient is the MCP bridge's side: the Connect calls its tools make.
func agentClient(url string) agentassistprotoconnect.SrvUIRelayClient {
	return agentassistprotoconnect.NewSrvUIRelayClient(http.DefaultClient, url, connect.WithInterceptors(
		connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set(auth.TokenHeader, tok)
				return next(ctx, req)
			}
		})))
}

const toolsMeta = `"client_meta":{"app":"web","version":"1.0.0","session":"desk","tools":[` +
	`{"name":"browser.screenshot","description":"Take a screenshot","parameters":{"type":"object","properties":{"url":{"type":"string"}}}},` +
	`{"name":"payments.transfer","description":"Send money","requires_approval":true}]}`

// TestBuiltinOrchestrator: with no orchestrator_url the token's MCP agent
// runs the client's runs through the relay session client_meta.session
// names: the message is the agent's user message (with the run id), its
// messages are deltas, its calls of the client's tools tool_requests
// (and approvals first where the tool asks for them), and waiting for
// the next message ends the run.
func TestBuiltinOrchestrator(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	agent := agentClient(e.url)
	ctx := context.Background()
	c := dial(t, e.url)
	c.hello("u1", toolsMeta)

	st, err := agent.GetUIState(ctx, &pb.GetUIStateRequest{RelaySession: "desk"})
	if err != nil || !strings.Contains(st.GetState().GetAllToolsJson(), `"browser_screenshot"`) || !strings.Contains(st.GetState().GetAllToolsJson(), `"payments_transfer"`) {
		t.Fatalf("the agent sees tools %v (%v)", st.GetState().GetAllToolsJson(), err)
	}
	c.send(strings.Replace(invokeWith("截个图"), "sess_001", c.sess, 1))
	run := str(c.expect("run_started"), "run_id")
	um, err := agent.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: "desk", TimeoutMs: 10000})
	if err != nil || !um.GetReceived() || um.GetText() != "截个图" || !strings.Contains(um.GetPayloadJson(), `"runId":"`+run+`"`) {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
	if r, err := agent.PostAgentMessage(ctx, &pb.AgentMessageRequest{RelaySession: "desk", Text: "好的"}); err != nil || r.GetError() != nil {
		t.Fatalf("send_agent_message = %v, %v", r, err)
	}
	if d := c.expect("delta"); str(d, "text") != "好的" || str(d, "run_id") != run {
		t.Fatalf("delta %v", d)
	}
	type out struct {
		r   *pb.CallUIToolResponse
		err error
	}
	called := make(chan out, 1)
	go func() {
		r, err := agent.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: "desk", ToolName: "browser_screenshot", ParamsJson: `{"url":"https://example.com"}`, Reason: "the user asked"})
		called <- out{r, err}
	}()
	tr := c.expect("tool_request")
	if str(tr, "tool_name") != "browser.screenshot" || str(tr, "run_id") != run || tr["deadline_ts"] == nil {
		t.Fatalf("tool_request %v", tr)
	}
	c.send(`{"type":"tool_result","ts":1,"run_id":"` + run + `","tool_call_id":"` + str(tr, "tool_call_id") + `","ok":true,"result":{"file_path":"/tmp/screenshot.png"}}`)
	res := <-called
	if res.err != nil || res.r.GetError() != nil || !strings.Contains(res.r.GetResultJson(), "/tmp/screenshot.png") {
		t.Fatalf("the agent's call got %v, %v", res.r, res.err)
	}

	// A tool that needs approval: approval_required first; a rejection
	// answers the agent's call.
	go func() {
		r, err := agent.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: "desk", ToolName: "payments_transfer", ParamsJson: `{"amount":100}`, Reason: "pay the bill"})
		called <- out{r, err}
	}()
	ar := c.expect("approval_required")
	if str(ar, "tool_name") != "payments.transfer" || !strings.Contains(str(ar, "args_summary"), "pay the bill") {
		t.Fatalf("approval_required %v", ar)
	}
	c.send(`{"type":"approval_decision","ts":1,"run_id":"` + run + `","approval_id":"` + str(ar, "approval_id") + `","decision":"reject","reason":"too much"}`)
	if st := c.expect("state"); str(st, "state") != "REJECTED" {
		t.Fatalf("state %v", st)
	}
	res = <-called
	if res.err != nil || res.r.GetError() == nil || !strings.Contains(res.r.GetError().GetMessage(), "too much") {
		t.Fatalf("the agent's call got %v, %v", res.r, res.err)
	}

	// The agent yields: done.
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = agent.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: "desk", TimeoutMs: 200})
	}()
	if d := c.expect("done"); str(d, "run_id") != run || d["usage"] == nil {
		t.Fatalf("done %v", d)
	}
	<-waited

	// cancel_run ends a run the agent has not answered.
	c.send(strings.Replace(invokeWith("再来"), "sess_001", c.sess, 1))
	run = str(c.expect("run_started"), "run_id")
	c.send(`{"type":"cancel_run","ts":1,"run_id":"` + run + `"}`)
	if st := c.expect("state"); str(st, "state") != "CANCELLED" {
		t.Fatalf("state %v", st)
	}
	c.expect("done")
}
