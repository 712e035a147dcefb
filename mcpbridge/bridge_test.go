package mcpbridge

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// fakeSrv stands in for agentassistant-srv's Connect client.
type fakeSrv struct {
	mu   sync.Mutex
	asks []*pb.AskQuestionRequest
	ask  func(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error)
}

func (f *fakeSrv) AskQuestion(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	f.mu.Lock()
	f.asks = append(f.asks, r)
	f.mu.Unlock()
	return f.ask(ctx, r)
}

func (f *fakeSrv) TaskFinish(ctx context.Context, r *pb.TaskFinishRequest) (*pb.TaskFinishResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
}

func (f *fakeSrv) WorkReport(ctx context.Context, r *pb.WorkReportRequest) (*pb.WorkReportResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
}

func (f *fakeSrv) SendMcpClientInfo(ctx context.Context, r *pb.McpClientInfoRequest) (*pb.McpClientInfoResponse, error) {
	return &pb.McpClientInfoResponse{Success: true}, nil
}

// newClient runs a bridge on f (or o.Client, when set) and connects an MCP
// client to it.
func newClient(t *testing.T, f *fakeSrv, o Options) *client.Client {
	t.Helper()
	if o.Client == nil {
		o.Client = f
	}
	o.Token, o.ServerURL = "tok-123456789", "http://127.0.0.1:22080"
	return connected(t, New(o).MCPServer, mcp.InitializeRequest{})
}

// connected connects an MCP client made with opts to s in process, closed
// when the test ends, and initializes it with init, in the latest
// protocol version.
func connected(t *testing.T, s *server.MCPServer, init mcp.InitializeRequest, opts ...client.ClientOption) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClientWithOptions(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(context.Background(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

// For the package's external tests.
var (
	Connected = connected
	Text      = text
)

func call(t *testing.T, c *client.Client, name string, args map[string]any, progress any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	if progress != nil {
		req.Params.Meta = &mcp.Meta{ProgressToken: progress}
	}
	r, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func text(r *mcp.CallToolResult) string {
	var s []string
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

func TestTimeoutClampAndText(t *testing.T) {
	f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("no reply"))
	}}
	c := newClient(t, f, Options{})
	for _, tc := range []struct {
		timeout any
		want    int32
	}{
		{nil, 600}, {1, 60}, {0, 600}, {300, 300}, {1e9, 86400}, {-5, 600},
		// Past what a time.Duration holds: still the longest, not the shortest.
		{1e12, 86400}, {"1e12", 86400}, {1e300, 86400},
	} {
		args := map[string]any{"question": "q"}
		if tc.timeout != nil {
			args["timeout"] = tc.timeout
		}
		r := call(t, c, "ask_question", args, nil)
		f.mu.Lock()
		got := f.asks[len(f.asks)-1]
		f.mu.Unlock()
		if got.GetRequest().GetTimeout() != tc.want {
			t.Errorf("timeout %v sent as %d, want %d", tc.timeout, got.GetRequest().GetTimeout(), tc.want)
		}
		if got.GetUserToken() != "tok-123456789" || got.GetID() == "" {
			t.Errorf("request = %v", got)
		}
		want := "No one answered the question within " + strconv.Itoa(int(tc.want)) + " seconds"
		if !r.IsError || !strings.Contains(text(r), want) {
			t.Errorf("result %q, want it to contain %q", text(r), want)
		}
	}
}

func TestUnreachableText(t *testing.T) {
	c := newClient(t, &fakeSrv{}, Options{FirstContact: 200 * time.Millisecond, Reconnect: 50 * time.Millisecond})
	r := call(t, c, "task_finish", map[string]any{"summary": "done"}, nil)
	if !r.IsError || !strings.Contains(text(r), "Could not reach agentassistant-srv at http://127.0.0.1:22080") ||
		!strings.Contains(text(r), "connection refused") {
		t.Errorf("result %q", text(r))
	}
}

func TestProgressWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	f := &fakeSrv{ask: func(ctx context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &pb.AskQuestionResponse{ID: r.ID, Contents: []*pb.McpResultContent{
			{Type: 1, Text: &pb.TextContent{Text: "yes"}},
			{Type: 3, Audio: &pb.AudioContent{Data: "AAAA", MimeType: "audio/ogg"}},
			{Type: 4, EmbeddedResource: &pb.EmbeddedResource{Uri: "file:///notes.txt", MimeType: "text/plain", Data: []byte("note")}},
		}}, nil
	}}
	c := newClient(t, f, Options{ProgressInterval: 20 * time.Millisecond})
	var mu sync.Mutex
	var progress []mcp.JSONRPCNotification
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			progress = append(progress, n)
			if len(progress) == 3 {
				close(release)
			}
			mu.Unlock()
		}
	})
	r := call(t, c, "ask_question", map[string]any{"question": "q"}, "p-1")
	if r.IsError || len(r.Content) != 3 || text(r) != "yes" {
		t.Fatalf("result = %+v", r)
	}
	if a, ok := r.Content[1].(mcp.AudioContent); !ok || a.Data != "AAAA" || a.MIMEType != "audio/ogg" {
		t.Errorf("audio = %+v", r.Content[1])
	}
	if e, ok := r.Content[2].(mcp.EmbeddedResource); !ok {
		t.Errorf("resource = %+v", r.Content[2])
	} else if tr, ok := e.Resource.(mcp.TextResourceContents); !ok || tr.Text != "note" {
		t.Errorf("resource = %+v", e.Resource)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) < 3 {
		t.Fatalf("%d progress notifications", len(progress))
	}
	if tok := progress[0].Params.AdditionalFields["progressToken"]; tok != "p-1" {
		t.Errorf("progress token = %v", tok)
	}
}

// uiWait is a web UI relay that only records the waits asked of it.
type uiWait struct {
	agentassistprotoconnect.SrvUIRelayClient
	mu    sync.Mutex
	waits []int32
}

func (u *uiWait) WaitUserMessage(_ context.Context, r *pb.WaitUserMessageRequest) (*pb.WaitUserMessageResponse, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.waits = append(u.waits, r.GetTimeoutMs())
	return &pb.WaitUserMessageResponse{}, nil
}

func (u *uiWait) GetUIState(context.Context, *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error) {
	return &pb.GetUIStateResponse{}, nil
}

// TestWaitUserTimeoutClamp: wait_user_message waits as long as asked
// within 1 to 50 seconds; a wait longer than a time.Duration holds is the
// longest, not the shortest.
func TestWaitUserTimeoutClamp(t *testing.T) {
	ui := &uiWait{}
	c := newClient(t, &fakeSrv{}, Options{UI: ui})
	for _, tc := range []struct {
		timeout any
		want    int32
	}{
		{nil, 30000}, {0.1, 1000}, {10, 10000}, {500, 50000}, {1e12, 50000}, {"1e300", 50000},
	} {
		args := map[string]any{}
		if tc.timeout != nil {
			args["timeout"] = tc.timeout
		}
		if r := call(t, c, "wait_user_message", args, nil); r.IsError {
			t.Fatalf("timeout %v: %s", tc.timeout, text(r))
		}
		ui.mu.Lock()
		got := ui.waits[len(ui.waits)-1]
		ui.mu.Unlock()
		if got != tc.want {
			t.Errorf("timeout %v waited %d ms, want %d", tc.timeout, got, tc.want)
		}
	}
}
