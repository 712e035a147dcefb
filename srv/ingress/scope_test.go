package ingress_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/ingress"
)

// agentOf is the MCP bridge's side for one token.
func agentOf(url, token string) agentassistprotoconnect.SrvUIRelayClient {
	return agentassistprotoconnect.NewSrvUIRelayClient(http.DefaultClient, url, connect.WithInterceptors(
		connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set(auth.TokenHeader, token)
				return next(ctx, req)
			}
		})))
}

// helloAs says hello with the given token and relay session, declaring
// the client tool echo.
func (c *client) helloAs(token, user, relaySession string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"type":"hello","ts":1,"user_id":%q,"api_key":%q,"client_meta":{"session":%q,"tools":[{"name":"echo"}]}}`, user, token, relaySession))
	ack := c.expect("hello_ack")
	c.sess = str(ack, "session_id")
}

// TestBuiltinToolCallsStayInTheirSession: two tokens, and two relay
// sessions of one token, each with an agent calling its client's tool
// echo at the same time. Every client gets a tool_request with an id of
// its own; each answer reaches its own agent; an answer to another
// session's call is refused there and does not disturb it.
func TestBuiltinToolCallsStayInTheirSession(t *testing.T) {
	e := newEnv(t, false, ingress.Options{}, ingress.HTTPOptions{})
	ctx := context.Background()
	type side struct {
		token, relay string
		c            *client
		agent        agentassistprotoconnect.SrvUIRelayClient
		run, call    string
		got          chan string
	}
	sides := []*side{{token: tok, relay: "desk"}, {token: tokB, relay: "desk"}, {token: tok, relay: "desk2"}}
	for i, s := range sides {
		s.c = dial(t, e.url)
		s.c.helloAs(s.token, fmt.Sprintf("u%d", i), s.relay)
		s.agent = agentOf(e.url, s.token)
		s.c.send(strings.Replace(invokeWith(fmt.Sprintf("hi %d", i)), "sess_001", s.c.sess, 1))
		s.run = str(s.c.expect("run_started"), "run_id")
		um, err := s.agent.WaitUserMessage(ctx, &pb.WaitUserMessageRequest{RelaySession: s.relay, TimeoutMs: 10000})
		if err != nil || !um.GetReceived() {
			t.Fatalf("side %d: wait_user_message = %v, %v", i, um, err)
		}
	}
	for _, s := range sides {
		s.got = make(chan string, 1)
		go func() {
			r, err := s.agent.CallUITool(ctx, &pb.CallUIToolRequest{RelaySession: s.relay, ToolName: "echo", ParamsJson: `{}`, Reason: "test"})
			switch {
			case err != nil:
				s.got <- "error: " + err.Error()
			case r.GetError() != nil:
				s.got <- "error: " + r.GetError().GetMessage()
			default:
				s.got <- r.GetResultJson()
			}
		}()
	}
	seen := map[string]int{}
	for i, s := range sides {
		tr := s.c.expect("tool_request")
		s.call = str(tr, "tool_call_id")
		if str(tr, "run_id") != s.run {
			t.Fatalf("side %d: tool_request %v of another run than %s", i, tr, s.run)
		}
		if j, dup := seen[s.call]; dup {
			t.Errorf("sides %d and %d both got tool_call_id %q", j, i, s.call)
		}
		seen[s.call] = i
	}
	// Side 0 answers side 1's call: refused, in its own session.
	sides[0].c.send(`{"type":"tool_result","ts":1,"tool_call_id":"` + sides[1].call + `","ok":true,"result":{"from":"side 0"}}`)
	sides[0].c.expectError("invalid_message")
	for i, s := range sides {
		s.c.send(fmt.Sprintf(`{"type":"tool_result","ts":1,"run_id":%q,"tool_call_id":%q,"ok":true,"result":{"from":"side %d"}}`, s.run, s.call, i))
	}
	for i, s := range sides {
		if got := <-s.got; !strings.Contains(got, fmt.Sprintf(`"side %d"`, i)) {
			t.Errorf("side %d's agent got %s", i, got)
		}
	}
}
