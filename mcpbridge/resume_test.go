package mcpbridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// resumable is a Backend in process that re-attaches by digest to the
// one request it was asked, and answers it with answer.
type resumable struct {
	inProcess
	asked  *pb.AskQuestionRequest
	answer string
}

func (r *resumable) AskQuestion(_ context.Context, req *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	r.asked = req
	// The call ends here; the test resumes it as another server would.
	return nil, "", connect.NewError(connect.CodeInvalidArgument, errors.New("ended for the test"))
}

func (r *resumable) Reattach(_ context.Context, kind wire.Kind, id string, sum [32]byte) (*pb.AskQuestionResponse, []*pb.Question, string, error) {
	q := r.asked.GetRequest()
	if r.asked == nil || id != r.asked.GetID() || wire.Digest(kind, q.GetProjectDirectory(), q.GetQuestion()) != sum {
		return nil, nil, "", connect.NewError(connect.CodeNotFound, errors.New("no such request"))
	}
	return &pb.AskQuestionResponse{ID: id, Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: r.answer}}}}, q.GetQuestions(), "phone", nil
}

// TestResumeAsTheCallWould: a call's request takes the ID its server
// chose (WithRequest), which is told the request's kind, digest and
// timeout before it is asked; another server's bridge resumes the call
// from those alone (Server.Resume) and gives its result as the call
// would: the answer read against the request's choices.
func TestResumeAsTheCallWould(t *testing.T) {
	be := &resumable{answer: "Blue"}
	o := Options{Backend: be, ServerURL: "http://127.0.0.1:22080"}
	o.defaults()
	b := newBridge(o)
	var kind wire.Kind
	var sum [32]byte
	var timeout time.Duration
	ctx := WithRequest(context.Background(), "chosen-id", func(k wire.Kind, s [32]byte, d time.Duration) {
		kind, sum, timeout = k, s, d
	})
	req := mcp.CallToolRequest{}
	req.Params.Arguments = map[string]any{"question": "Which colour?", "project_directory": "/p", "timeout": 120,
		"options": []any{"Blue", "Red"}}
	if _, err := b.ask(wire.AskQuestion, "ask_question", "question")(ctx, req); err != nil {
		t.Fatal(err)
	}
	if be.asked.GetID() != "chosen-id" {
		t.Fatalf("the request's ID is %q, not the one chosen", be.asked.GetID())
	}
	if kind != wire.AskQuestion || sum != wire.Digest(wire.AskQuestion, "/p", "Which colour?") || timeout != 120*time.Second {
		t.Fatalf("told %v %x %v", kind, sum, timeout)
	}

	other := &Server{b: newBridge(o)}
	res := other.Resume(context.Background(), kind, "chosen-id", sum, timeout)
	if res.IsError || !strings.Contains(text(res), "Blue") {
		t.Fatalf("the resumed call's result: %+v", res)
	}
	if got, ok := res.StructuredContent.(answer); !ok || len(got.Chosen) != 1 || got.Chosen[0] != "Blue" {
		t.Errorf("the answer is not read against the request's choices: %+v", res.StructuredContent)
	}
	res = other.Resume(context.Background(), kind, "chosen-id", wire.Digest(wire.AskQuestion, "/p", "Which shape?"), timeout)
	if !res.IsError || !strings.Contains(text(res), "no longer knows the question") {
		t.Errorf("a resume of another request: %+v", res)
	}
}
