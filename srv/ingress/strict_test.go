package ingress_test

import (
	"context"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/ingress"
)

// TestToolResultGivenTwice: a client's tool_result whose result gives a
// key twice is refused with invalid_message and does not reach the
// agent; the call still waits, and the client's good result answers it.
func TestToolResultGivenTwice(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	agent := agentClient(e.url)
	ctx := context.Background()
	c := dial(t, e.url)
	c.hello("u1", toolsMeta)
	c.send(strings.Replace(invokeWith("截个图"), "sess_001", c.sess, 1))
	run := str(c.expect("run_started"), "run_id")
	if _, err := agent.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: "desk", TimeoutMs: 10000}); err != nil {
		t.Fatal(err)
	}
	type out struct {
		r   *pb.CallUIToolResponse
		err error
	}
	called := make(chan out, 1)
	go func() {
		r, err := agent.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: "desk", ToolName: "browser_screenshot", ParamsJson: `{"url":"https://example.com"}`, Reason: "asked"})
		called <- out{r, err}
	}()
	tr := c.expect("tool_request")
	head := `{"type":"tool_result","ts":1,"run_id":"` + run + `","tool_call_id":"` + str(tr, "tool_call_id") + `","ok":true,"result":`
	for _, result := range []string{
		`{"file":{"backendData":"SECRET"},"file":{"path":"/tmp/a.png"}}`,
		`{"file":{"meta":[{"backendData":"SECRET"}],"meta":0}}`,
		`[{"x":{"backendData":"SECRET"},"x":{}}]`,
		`{"file":{"backendData":"SECRET"},"\u0066ile":{}}`,
	} {
		c.send(head + result + `}`)
		if m := c.expectError("invalid_message"); !strings.Contains(str(m, "message"), "more than once") {
			t.Fatalf("refusal %v", m)
		}
	}
	select {
	case o := <-called:
		t.Fatalf("a refused result reached the agent: %v %v", o.r, o.err)
	default:
	}
	c.send(head + `{"file":{"path":"/tmp/screenshot.png"}}}`)
	o := <-called
	if o.err != nil || o.r.GetError() != nil || !strings.Contains(o.r.GetResultJson(), "/tmp/screenshot.png") || strings.Contains(o.r.String(), "SECRET") {
		t.Fatalf("the agent's call got %v, %v", o.r, o.err)
	}
}

// TestHelloGivenTwice: a hello that gives a key twice is refused before
// the api_key is looked at.
func TestHelloGivenTwice(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	c := dial(t, e.url)
	c.send(`{"type":"hello","ts":1,"user_id":"u1","api_key":"` + tok + `","api_key":"` + tokB + `"}`)
	if m := c.expectError("invalid_message"); !strings.Contains(str(m, "message"), `"api_key" is given more than once`) {
		t.Fatalf("refusal %v", m)
	}
}
