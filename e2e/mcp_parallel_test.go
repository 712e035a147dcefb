package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestParallelQuestionsOverStdioAllReachThePerson: an agent (subagents of
// one MCP client, say) asks twelve questions at once through one
// agentassistant-mcp. Every one reaches the person's screen while the
// others wait; none waits in the MCP process for another to be answered
// first. Each answer goes back to the call that asked it.
func TestParallelQuestionsOverStdioAllReachThePerson(t *testing.T) {
	const n = 12
	s := startServer(t, tokenA)
	ui := dial(t, s, tokenA, "pc")
	agent := startMCP(t, s, tokenA)

	type res struct {
		i    int
		text string
		err  error
	}
	done := make(chan res, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range n {
		go func() {
			r, err := callTool(ctx, agent, "ask_question", map[string]any{"question": fmt.Sprintf("question %d?", i)})
			if err != nil {
				done <- res{i, "", err}
				return
			}
			done <- res{i, resultText(r), nil}
		}()
	}

	asked := map[string]string{} // question -> request ID
	for len(asked) < n {
		m, err := ui.Expect("AskQuestion", 15*time.Second)
		if err != nil {
			t.Fatalf("%d of %d questions reached the screen: %v", len(asked), n, err)
		}
		q := m.GetAskQuestionRequest()
		asked[q.GetRequest().GetQuestion()] = q.GetID()
	}
	for i := range n {
		id, ok := asked[fmt.Sprintf("question %d?", i)]
		if !ok {
			t.Fatalf("question %d never shown: %v", i, asked)
		}
		if err := ui.Send(wstest.TextReply(id, fmt.Sprintf("answer %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("call %d: %v", r.i, r.err)
			}
			if want := fmt.Sprintf("answer %d", r.i); r.text != want {
				t.Errorf("call %d got %q, want %q", r.i, r.text, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("a call did not return after its answer")
		}
	}
}
