package mcpbridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
		res := askShipIt(t, be)
		if got, wants := text(res), "No one answered the question within 60 seconds"; !res.IsError || !strings.Contains(got, wants) {
			t.Errorf("result %q, want an error saying %q", got, wants)
		}
		if be.asks != 1 {
			t.Errorf("asked %d times, want 1", be.asks)
		}
	})
}

// lostThenKept is a Backend whose first ask finds the server gone after
// 30 s (Unavailable: an instance that lost NATS), and whose next is made
// again; it records each ask's timeout.
type lostThenKept struct {
	inProcess
	timeouts []int32
}

func (p *lostThenKept) AskQuestion(ctx context.Context, q *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	p.timeouts = append(p.timeouts, q.GetRequest().GetTimeout())
	if len(p.timeouts) == 1 {
		time.Sleep(30 * time.Second)
		return nil, "", connect.NewError(connect.CodeUnavailable, errors.New("this instance lost its link to NATS"))
	}
	<-ctx.Done()
	return nil, "", connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
}

// TestAskedAgainWithWhatIsLeft: a call asked again (its server lost,
// the request maybe with it, as when NATS loses its storage) asks with
// the time left of its timeout, so a request made again keeps the
// deadline the agent was given rather than starting a fresh one.
func TestAskedAgainWithWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be := &lostThenKept{}
		askShipIt(t, be)
		if len(be.timeouts) < 2 || be.timeouts[0] != 60 || be.timeouts[1] > 30 || be.timeouts[1] < 28 {
			t.Errorf("timeouts asked %v, want 60 then what was left, about 29", be.timeouts)
		}
	})
}

// askShipIt asks "Ship it?" with a 60-second timeout through a bridge on
// be, and returns what the agent is told.
func askShipIt(t *testing.T, be Backend) *mcp.CallToolResult {
	t.Helper()
	o := Options{Backend: be, ServerURL: "http://127.0.0.1:22080"}
	o.defaults()
	req := mcp.CallToolRequest{}
	req.Params.Arguments = map[string]any{"question": "Ship it?", "timeout": 60}
	res, err := newBridge(o).ask(wire.AskQuestion, "ask_question", "question")(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
