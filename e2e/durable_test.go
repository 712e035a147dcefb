package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

type callResult struct {
	r   *mcp.CallToolResult
	err error
}

func askAsync(agent interface {
	CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
}, question string) chan callResult {
	done := make(chan callResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "ask_question"
		req.Params.Arguments = map[string]any{"question": question}
		r, err := agent.CallTool(context.Background(), req)
		done <- callResult{r, err}
	}()
	return done
}

// pendingQuestion logs in and waits until the question is in the pending
// list, as a browser reconnecting would see it.
func pendingQuestion(t *testing.T, s *server, text string) (*wstest.Client, string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		c, err := wstest.Dial(s.URL, s.Token, "phone", nil)
		if err == nil && c.Login.GetSuccess() {
			t.Cleanup(func() { c.Close() })
			for time.Now().Before(deadline) {
				if err := c.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
					break
				}
				m, err := c.Expect("GetPendingMessages", 5*time.Second)
				if err != nil {
					break
				}
				for _, p := range m.GetGetPendingMessagesResponse().GetPendingMessages() {
					if p.GetAskQuestionRequest().GetRequest().GetQuestion() == text {
						return c, p.GetAskQuestionRequest().GetID()
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("question %q never pending", text)
	return nil, ""
}

// TestServerKilledWithQuestionPending: kill -9 the server while a question
// waits, start it again; the question is back on the screens, the answer
// given afterwards reaches the agent, whose tool call never failed.
func TestServerKilledWithQuestionPending(t *testing.T) {
	port, data := freePort(t), t.TempDir()
	s := startServerWith(t, port, data, nil, tokenA)
	mcpLog := &lockedWriter{b: &strings.Builder{}}
	agent := startMCPLogged(t, s, tokenA, mcpLog)
	done := askAsync(agent, "Survive a kill -9?")
	_, id := pendingQuestion(t, s, "Survive a kill -9?")

	s.kill9(t)
	// Until agentassistant-mcp has seen the call break and then the
	// server refuse it, and kept the call both times.
	for try := 0; strings.Count(mcpLog.String(), "will re-attach") < 2; try++ {
		select {
		case r := <-done:
			t.Fatalf("the tool call ended when the server died: %+v %v", r.r, r.err)
		case <-time.After(10 * time.Millisecond):
		}
		if try == 1500 {
			t.Fatalf("agentassistant-mcp never tried again; its log:\n%s", mcpLog.String())
		}
	}
	select {
	case r := <-done:
		t.Fatalf("the tool call ended when the server died: %+v %v", r.r, r.err)
	default:
	}
	s2 := startServerWith(t, port, data, nil, tokenA)
	ui, id2 := pendingQuestion(t, s2, "Survive a kill -9?")
	if id2 != id {
		t.Fatalf("restored as %s, was %s", id2, id)
	}
	if err := ui.Send(wstest.TextReply(id, "Yes, after the restart.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "Yes, after the restart." {
			t.Fatalf("result = %+v %v: %s", r.r, r.err, resultText(r.r))
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the answer never reached the agent")
	}
}

// TestMCPLosesServerFor10s: the link between agentassistant-mcp and the
// server is cut for 10 s mid-call (a proxy resets it and refuses new
// connections); the person answers meanwhile; the agent gets the answer
// once the link is back.
func TestMCPLosesServerFor10s(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a link for 10 s")
	}
	s := startServer(t, tokenA)
	proxy, err := faultproxy.Start(net.JoinHostPort(s.Host, s.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	host, port, _ := net.SplitHostPort(proxy.Addr())
	agent := startMCP(t, &server{Host: host, Port: port}, tokenA)
	proxy.SetDelay(2 * time.Millisecond)
	done := askAsync(agent, "Across a broken link?")
	ui, id := pendingQuestion(t, s, "Across a broken link?")

	proxy.SetDown(true)
	cut := time.Now()
	// The person answers once the screens say no agent waits (the server
	// saw the call go), as someone seeing that would.
	m, err := ui.Expect("RequestAgentStatus", 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n := m.GetRequestAgentStatusNotification(); n.GetRequestId() != id || !n.GetAgentGone() {
		t.Fatalf("agent status while the link is down: %v", n)
	}
	if err := ui.Send(wstest.TextReply(id, "Answered while you were away.")); err != nil {
		t.Fatal(err)
	}
	if _, err := ui.Expect("AskQuestionReplyNotification", time.Second); err == nil {
		t.Log("(notification went to this client too)")
	}
	// The link stays down for 10 s in all: the outage the test is about,
	// not a wait for something to happen.
	time.Sleep(time.Until(cut.Add(10 * time.Second)))
	select {
	case r := <-done:
		t.Fatalf("the tool call ended while the link was down: %+v %v", r.r, r.err)
	default:
	}
	proxy.SetDown(false)
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "Answered while you were away." {
			t.Fatalf("result = %+v %v: %s", r.r, r.err, resultText(r.r))
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the answer never reached the agent")
	}
}
