package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestBuiltinMessageOverBudget: an agent_invoke whose message would pass
// the token's relay budget ([relay] max_state_bytes_per_token) does not
// leave its run open with the message dropped: the run ends at once with
// orchestrator_error saying the message was not taken and why, and the
// session's next run with a message that fits goes to the agent.
func TestBuiltinMessageOverBudget(t *testing.T) {
	e := newEnvRelay(t, false, ingress.Options{AgentWait: time.Hour}, ingress.HTTPOptions{}, relay.Options{MaxStatePerToken: 4096})
	c := dial(t, e.url)
	c.hello("u1", `"client_meta":{"app":"web","session":"budget"}`)
	c.send(strings.Replace(invokeWith(strings.Repeat("长", 3000)), "sess_001", c.sess, 1))
	run := str(c.expect("run_started"), "run_id")
	er := c.expectError("orchestrator_error")
	msg := str(er, "message")
	if str(er, "run_id") != run || !strings.Contains(msg, "[relay] max_state_bytes_per_token") || !strings.Contains(msg, "not passed to the agent") {
		t.Fatalf("error %v", er)
	}
	c.send(strings.Replace(strings.Replace(invokeWith("短"), "sess_001", c.sess, 1), "req_abc123", "req_2", 1))
	if rs := c.expect("run_started"); str(rs, "run_id") == run {
		t.Fatalf("run_started %v", rs)
	}
	um, err := agentClient(e.url).WaitUserMessage(context.Background(), &pb.WaitUserMessageRequest{RelaySession: "budget", TimeoutMs: 10000})
	if err != nil || !um.GetReceived() || um.GetText() != "短" {
		t.Fatalf("wait_user_message = %v, %v", um, err)
	}
}

// TestBuiltinToolsOverBudget: a client whose tools would pass the
// token's relay budget is not left believing the agent has them: its run
// ends with orchestrator_error saying the tools are not published and
// why, before its message goes to an agent that cannot call them.
func TestBuiltinToolsOverBudget(t *testing.T) {
	e := newEnvRelay(t, false, ingress.Options{AgentWait: time.Hour}, ingress.HTTPOptions{}, relay.Options{MaxStatePerToken: 4096})
	c := dial(t, e.url)
	c.hello("u1", `"client_meta":{"app":"web","session":"fat","tools":[{"name":"shot","description":"`+strings.Repeat("d", 8000)+`"}]}`)
	c.send(strings.Replace(invokeWith("截图"), "sess_001", c.sess, 1))
	run := str(c.expect("run_started"), "run_id")
	er := c.expectError("orchestrator_error")
	msg := str(er, "message")
	if str(er, "run_id") != run || !strings.Contains(msg, "[relay] max_state_bytes_per_token") || !strings.Contains(msg, "tools") {
		t.Fatalf("error %v", er)
	}
}
