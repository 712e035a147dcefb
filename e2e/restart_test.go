package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// stopCleanly stops the server the clean way (SIGTERM, as a service
// manager or Ctrl+C would) and waits for it to exit.
func (s *server) stopCleanly(t *testing.T) {
	t.Helper()
	s.killed = true
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
}

// askFromProject calls ask_question from project dir in the background.
func askFromProject(agent interface {
	CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
}, question, dir string) chan callResult {
	done := make(chan callResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "ask_question"
		req.Params.Arguments = map[string]any{"question": question, "project_directory": dir}
		r, err := agent.CallTool(context.Background(), req)
		done <- callResult{r, err}
	}()
	return done
}

// TestServerStoppedCleanlyWithQuestionPending: a clean stop (SIGTERM) while
// a question waits is at least as safe as kill -9: the agent's tool call
// stays open, re-attaches after the restart and gets the answer given then.
func TestServerStoppedCleanlyWithQuestionPending(t *testing.T) {
	port, data := freePort(t), t.TempDir()
	s := startServerWith(t, port, data, nil, tokenA)
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, "Survive a clean stop?")
	_, id := pendingQuestion(t, s, "Survive a clean stop?")

	s.stopCleanly(t)
	s2 := startServerWith(t, port, data, nil, tokenA)
	ui, id2 := pendingQuestion(t, s2, "Survive a clean stop?")
	if id2 != id {
		t.Fatalf("restored as %s, was %s", id2, id)
	}
	if err := ui.Send(wstest.TextReply(id, "Yes, after the clean restart.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "Yes, after the clean restart." {
			t.Fatalf("result = %+v %v: %s", r.r, r.err, resultText(r.r))
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the answer never reached the agent")
	}
}

// TestMCPRestartKeepsTheAnswer: the LLM client restarts agentassistant-mcp
// while a question waits. The question stays on the screens, marked as
// having no agent waiting; the person's answer is kept and handed to the
// next call from the same project, once, instead of asking that one.
func TestMCPRestartKeepsTheAnswer(t *testing.T) {
	s := startServer(t, tokenA)
	const project = "/home/me/shop"
	agent := startMCP(t, s, tokenA)
	done := askFromProject(agent, "Which port should the shop listen on?", project)
	ui, id := pendingQuestion(t, s, "Which port should the shop listen on?")

	// The client restarts its MCP server: stdin closes, the process exits.
	if err := agent.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	<-done
	// The screens learn that no agent waits for it any more; it is not
	// withdrawn.
	m, err := ui.Expect("RequestAgentStatus", 20*time.Second)
	if err != nil {
		t.Fatalf("the question's agent went away: %v", err)
	}
	if n := m.GetRequestAgentStatusNotification(); n.GetRequestId() != id || !n.GetAgentGone() {
		t.Fatalf("agent status = %v", n)
	}
	if err := ui.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
		t.Fatal(err)
	}
	pm, err := ui.Expect("GetPendingMessages", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ps := pm.GetGetPendingMessagesResponse().GetPendingMessages(); len(ps) != 1 || !ps[0].GetAgentGone() {
		t.Fatalf("pending = %v", ps)
	}
	if err := ui.Send(wstest.TextReply(id, "Port 8080.")); err != nil {
		t.Fatal(err)
	}
	if err := ui.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
		t.Fatal(err)
	}
	if pm, err := ui.Expect("GetPendingMessages", 5*time.Second); err != nil || len(pm.GetGetPendingMessagesResponse().GetPendingMessages()) != 0 {
		t.Fatalf("after the answer: %v %v", pm, err) // an Error frame (not pending) fails here too
	}

	// The restarted process, from the same project: its next call gets the
	// answer at once, and its own question is not put on the screens.
	agent2 := startMCP(t, s, tokenA)
	var r callResult
	select {
	case r = <-askFromProject(agent2, "Which host name should the shop use?", project):
	case <-time.After(30 * time.Second):
		t.Fatal("the next call waits: it was asked instead of getting the kept answer")
	}
	if r.err != nil || r.r.IsError {
		t.Fatalf("result = %+v %v", r.r, r.err)
	}
	got := resultText(r.r)
	t.Logf("the next call's result:\n%s", got)
	for _, want := range []string{"Which port should the shop listen on?", "Port 8080.", "call ask_question again"} {
		if !strings.Contains(got, want) {
			t.Errorf("result %q lacks %q", got, want)
		}
	}
	if err := ui.Quiet(500 * time.Millisecond); err != nil {
		t.Fatalf("the new question reached the screens: %v", err)
	}

	// Handed over once: the next call is asked as usual.
	done = askFromProject(agent2, "Which host name should the shop use?", project)
	m, err = ui.Expect("AskQuestion", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := ui.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "shop.local")); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || resultText(r.r) != "shop.local" {
		t.Fatalf("second call = %+v %v", r.r, r.err)
	}
}
