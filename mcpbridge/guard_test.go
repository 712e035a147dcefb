package mcpbridge

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// outlasting is a Backend whose question outlasts the call: it ends only
// with the call's context, as a server whose request was made again with
// a fresh timeout (after NATS lost its storage) ends it, Canceled.
type outlasting struct{ inProcess }

func (p *outlasting) AskQuestion(ctx context.Context, _ *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	p.asks++
	<-ctx.Done()
	return nil, "", connect.NewError(connect.CodeCanceled, ctx.Err())
}

// TestGuardEndsACallAsItsTimeout: a call the server keeps past the
// request's deadline is ended by the call's own guard, and the agent is
// told no one answered within its timeout, not that the question was
// withdrawn (it was not: its deadline passed).
func TestGuardEndsACallAsItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be := &outlasting{}
		o := Options{Backend: be, ServerURL: "http://127.0.0.1:22080"}
		o.defaults()
		b := newBridge(o)
		req := mcp.CallToolRequest{}
		req.Params.Arguments = map[string]any{"question": "Ship it?", "timeout": 60}
		res, err := b.ask(wire.AskQuestion, "ask_question", "question")(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got, wants := text(res), "No one answered the question within 60 seconds"; !res.IsError || !strings.Contains(got, wants) {
			t.Errorf("result %q, want an error saying %q", got, wants)
		}
		if be.asks != 1 {
			t.Errorf("asked %d times, want 1", be.asks)
		}
	})
}
