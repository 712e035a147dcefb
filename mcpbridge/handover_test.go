package mcpbridge

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// fakeControl stands in for the server's SrvAgentAssistControl.
type fakeControl struct {
	mu      sync.Mutex
	cancels []string
	takes   []*pb.TakeMissedAnswersRequest
	missed  map[string][]*pb.MissedAnswer // by project, handed over once
}

func (f *fakeControl) CancelRequest(_ context.Context, r *pb.CancelRequestRequest) (*pb.MsgEmpty, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, r.GetID())
	return &pb.MsgEmpty{}, nil
}

func (f *fakeControl) TakeMissedAnswers(_ context.Context, r *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes = append(f.takes, r)
	as := f.missed[r.GetProjectDirectory()]
	delete(f.missed, r.GetProjectDirectory())
	return &pb.TakeMissedAnswersResponse{Answers: as}, nil
}

// TestMissedAnswersHandedOver: the next call from the project gets the
// answers given while no agent waited, instead of asking; the person is
// not asked; the calls still waiting in this process are left out.
func TestMissedAnswersHandedOver(t *testing.T) {
	now := time.Now()
	ctl := &fakeControl{missed: map[string][]*pb.MissedAnswer{"/shop": {{
		MessageType: "AskQuestion", ID: "old-1", Text: "Which **port**?",
		CreatedAt: now.Add(-12 * time.Minute).UnixMilli(), AnsweredAt: now.Add(-9 * time.Minute).UnixMilli(), AnsweredBy: "phone",
		Response: &pb.AskQuestionResponse{ID: "old-1", Contents: []*pb.McpResultContent{
			{Type: 1, Text: &pb.TextContent{Text: "Port 8080."}},
			{Type: 2, Image: &pb.ImageContent{Data: pixelPNG, MimeType: "image/png"}},
		}},
	}}}}
	release := make(chan struct{})
	f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &pb.AskQuestionResponse{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: "ok"}}}}, nil
	}}
	c := newClient(t, f, Options{Control: ctl})

	// A call from another project waits meanwhile.
	other := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "ask_question", map[string]any{"question": "elsewhere?", "project_directory": "/blog"}
		r, _ := c.CallTool(context.Background(), req)
		other <- r
	}()
	waitingID := ""
	for deadline := time.Now().Add(10 * time.Second); waitingID == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other project's call never reached the server")
		}
		f.mu.Lock()
		if len(f.asks) == 1 {
			waitingID = f.asks[0].GetID()
		}
		f.mu.Unlock()
	}

	r := call(t, c, "ask_question", map[string]any{"question": "Which host?", "project_directory": "/shop"}, nil)
	got := text(r)
	for _, want := range []string{"asked 12 min ago, answered 9 min ago on phone", "> Which **port**?", "Port 8080.", "call ask_question again"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if r.IsError || !slices.ContainsFunc(r.Content, func(c mcp.Content) bool { im, ok := c.(mcp.ImageContent); return ok && im.Data == pixelPNG }) {
		t.Errorf("result = %+v", r)
	}
	f.mu.Lock()
	asked := len(f.asks)
	f.mu.Unlock()
	if asked != 1 {
		t.Errorf("the new question was asked too")
	}
	ctl.mu.Lock()
	last := ctl.takes[len(ctl.takes)-1]
	ctl.mu.Unlock()
	if last.GetUserToken() != "tok-123456789" || last.GetProjectDirectory() != "/shop" || !slices.Equal(last.GetExceptIds(), []string{waitingID}) {
		t.Errorf("take request = %v", last)
	}

	// Handed over once: the next report is made as usual.
	ctl.mu.Lock()
	ctl.missed["/shop"] = []*pb.MissedAnswer{{MessageType: "TaskFinish", ID: "old-2", Text: "Done.", Response: &pb.AskQuestionResponse{}}}
	ctl.mu.Unlock()
	r = call(t, c, "task_finish", map[string]any{"summary": "Shipped.", "project_directory": "/shop"}, nil)
	if got := text(r); !strings.Contains(got, "earlier task report") || !strings.Contains(got, "acknowledged the task report") ||
		!strings.Contains(got, "call task_finish again") {
		t.Errorf("task report hand-over %q", got)
	}
	close(release)
	if r := <-other; text(r) != "ok" {
		t.Errorf("other project's call = %q", text(r))
	}
}

// TestSessionEndLeavesRequestPending: a call the MCP client cancels is
// withdrawn; one cut short because the session ends (the client restarts
// agentassistant-mcp) is left pending for the next one.
func TestSessionEndLeavesRequestPending(t *testing.T) {
	for _, ending := range []bool{false, true} {
		ctl := &fakeControl{}
		done := make(chan struct{})
		o := Options{Control: ctl, Done: done}
		o.defaults()
		b := newBridge(o)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan *mcp.CallToolResult, 1)
		go func() {
			r, _ := b.wait(ctx, mcp.CallToolRequest{}, wire.AskQuestion, "id-1", nil, time.Minute, func(ctx context.Context) (*pb.AskQuestionResponse, error) {
				<-ctx.Done()
				return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
			})
			res <- r
		}()
		if ending {
			close(done) // as stdin closing or a signal does, before the calls' contexts end
		}
		cancel()
		got := text(<-res)
		if want := map[bool]int{false: 1, true: 0}[ending]; len(ctl.cancels) != want {
			t.Errorf("session ending %v: %d withdrawals, want %d", ending, len(ctl.cancels), want)
		}
		if want := map[bool]string{false: "was withdrawn", true: "answer is kept"}[ending]; !strings.Contains(got, want) {
			t.Errorf("session ending %v: %q lacks %q", ending, got, want)
		}
	}
}
