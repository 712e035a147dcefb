package mcpbridge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// generationSrv is a server of one agentassistant generation: the
// procedures of the other are not there (HTTP 404, as on upstream's
// servers). It answers every request at once and keeps what it got.
type generationSrv struct {
	agentassistprotoconnect.UnimplementedSrvAgentAssistHandler
	mu      sync.Mutex
	reports []*pb.McpWorkReportRequest // both generations' requests, as the current one names them
	asks    []*pb.McpAskQuestionRequest
}

func (g *generationSrv) AskQuestion(_ context.Context, r *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
	g.mu.Lock()
	g.asks = append(g.asks, r.GetRequest())
	g.mu.Unlock()
	return &pb.AskQuestionResponse{ID: r.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: "answered"}}}}, nil
}

func (g *generationSrv) WorkReport(_ context.Context, r *pb.WorkReportRequest) (*pb.WorkReportResponse, error) {
	g.mu.Lock()
	g.reports = append(g.reports, r.GetRequest())
	g.mu.Unlock()
	return &pb.WorkReportResponse{ID: r.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: "report seen"}}}}, nil
}

func (g *generationSrv) TaskFinish(_ context.Context, r *pb.TaskFinishRequest) (*pb.TaskFinishResponse, error) {
	q := r.GetRequest()
	g.mu.Lock()
	g.reports = append(g.reports, &pb.McpWorkReportRequest{ProjectDirectory: q.GetProjectDirectory(), Summary: q.GetSummary(), Timeout: q.GetTimeout(),
		AgentName: q.GetAgentName(), ReasoningModelName: q.GetReasoningModelName(), McpClientName: q.GetMcpClientName()})
	g.mu.Unlock()
	return &pb.TaskFinishResponse{ID: r.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: "report seen"}}}}, nil
}

// serve runs g with the procedure missing (404) and returns its URL.
func (g *generationSrv) serve(t *testing.T, missing string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(agentassistprotoconnect.NewSrvAgentAssistHandler(g))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == missing {
			http.NotFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestBothServerGenerations: the bridge reports a finished task to a
// server of the current upstream generation (WorkReport only) and of the
// TaskFinish generation (TaskFinish only), and tells either who asks: the
// agent and model the LLM names, the MCP client from its initialize.
func TestBothServerGenerations(t *testing.T) {
	for _, tc := range []struct{ name, missing string }{
		{"current (WorkReport)", agentassistprotoconnect.SrvAgentAssistTaskFinishProcedure},
		{"TaskFinish era", agentassistprotoconnect.SrvAgentAssistWorkReportProcedure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &generationSrv{}
			url := g.serve(t, tc.missing)
			init := mcp.InitializeRequest{}
			init.Params.ClientInfo = mcp.Implementation{Name: "claude-code", Version: "2.1"}
			c := connected(t, New(Options{
				Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, url),
				Token:  "tok-123456789", ServerURL: url,
			}).MCPServer, init)
			for range 2 { // the second call goes straight to the procedure that is there
				r := call(t, c, "task_finish", map[string]any{"summary": "Done.", "agent_name": "Claude Code", "reasoning_model_name": "claude-opus-4"}, nil)
				if r.IsError || text(r) != "report seen" {
					t.Fatalf("task_finish: %q (error %v)", text(r), r.IsError)
				}
			}
			r := call(t, c, "ask_question", map[string]any{"question": "Which?", "agent_name": "Claude Code", "reasoning_model_name": "claude-opus-4"}, nil)
			if r.IsError {
				t.Fatalf("ask_question: %q", text(r))
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.reports) != 2 {
				t.Fatalf("the server got %d reports", len(g.reports))
			}
			for _, q := range g.reports {
				if q.GetSummary() != "Done." || q.GetAgentName() != "Claude Code" || q.GetReasoningModelName() != "claude-opus-4" || q.GetMcpClientName() != "claude-code" {
					t.Errorf("report = %v", q)
				}
			}
			if q := g.asks[0]; q.GetAgentName() != "Claude Code" || q.GetReasoningModelName() != "claude-opus-4" || q.GetMcpClientName() != "claude-code" {
				t.Errorf("question = %v", q)
			}
		})
	}
}

// TestWorkReportTool: the current upstream generation's rules tell agents
// to call work_report (upstream's cmd/agentassistant-mcp: project_directory,
// summary, timeout, agent_name, reasoning_model_name). It is listed beside
// task_finish with those arguments and answered the same way, by servers
// of either generation.
func TestWorkReportTool(t *testing.T) {
	for _, tc := range []struct{ name, missing string }{
		{"current (WorkReport)", agentassistprotoconnect.SrvAgentAssistTaskFinishProcedure},
		{"TaskFinish era", agentassistprotoconnect.SrvAgentAssistWorkReportProcedure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &generationSrv{}
			c := newClient(t, nil, Options{Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, g.serve(t, tc.missing))})
			tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var wr *mcp.Tool
			for i := range tools.Tools {
				if tools.Tools[i].Name == "work_report" {
					wr = &tools.Tools[i]
				}
			}
			if wr == nil {
				t.Fatalf("no work_report among %d tools", len(tools.Tools))
			}
			var args []string
			for name := range wr.InputSchema.Properties {
				args = append(args, name)
			}
			slices.Sort(args)
			// Upstream's arguments, and the choices it may offer besides.
			if want := []string{"agent_name", "allow_other", "multi_select", "options", "project_directory", "reasoning_model_name", "summary", "timeout"}; !slices.Equal(args, want) {
				t.Errorf("work_report takes %v, want upstream's and the choices %v", args, want)
			}
			if !slices.Equal(wr.InputSchema.Required, []string{"summary"}) {
				t.Errorf("work_report requires %v", wr.InputSchema.Required)
			}

			r := call(t, c, "work_report", map[string]any{"project_directory": "/home/me/shop", "summary": "Refactored the payment module.",
				"timeout": 600, "agent_name": "Antigravity", "reasoning_model_name": "gemini-3-pro"}, nil)
			if r.IsError || text(r) != "report seen" {
				t.Fatalf("work_report: %q (error %v)", text(r), r.IsError)
			}
			if r := call(t, c, "work_report", map[string]any{"summary": " "}, nil); !r.IsError || !strings.Contains(text(r), "work_report needs a non-empty \"summary\"") {
				t.Errorf("work_report without a summary: %q", text(r))
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.reports) != 1 {
				t.Fatalf("the server got %d reports", len(g.reports))
			}
			if q := g.reports[0]; q.GetSummary() != "Refactored the payment module." || q.GetProjectDirectory() != "/home/me/shop" || q.GetTimeout() != 600 ||
				q.GetAgentName() != "Antigravity" || q.GetReasoningModelName() != "gemini-3-pro" {
				t.Errorf("report = %v", q)
			}
		})
	}
}

// TestOptionsInTextForUpstreamServer: upstream's released server and its
// web UI and app know nothing of a request's Questions (field 7), so a
// question's options sent only there never reach the person. A server
// without SrvAgentAssistControl is such a server: the bridge writes the
// options into the text as well (as this server does for its clients that
// do not show them), and leaves Questions as asked for those that do.
// This server shows them itself: its text stays as asked.
func TestOptionsInTextForUpstreamServer(t *testing.T) {
	opts := []any{map[string]any{"label": "Red"}, map[string]any{"label": "Blue", "description": "the sea"}}
	const extra = "\n\nAnswer with one of:\n- Red\n- Blue (the sea)\n\nOr answer in your own words."
	for _, tc := range []struct {
		name     string
		upstream bool
	}{{"upstream", true}, {"this server", false}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &generationSrv{}
			url := g.serve(t, agentassistprotoconnect.SrvAgentAssistTaskFinishProcedure)
			o := Options{Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, url)}
			if tc.upstream {
				o.Control = agentassistprotoconnect.NewSrvAgentAssistControlClient(http.DefaultClient, url) // 404
			} else {
				o.Control = &fakeControl{}
			}
			c := newClient(t, nil, o)
			if r := call(t, c, "ask_question", map[string]any{"question": "Which colour?", "options": opts}, nil); r.IsError {
				t.Fatalf("ask_question: %q", text(r))
			}
			if r := call(t, c, "task_finish", map[string]any{"summary": "Painted.", "options": opts}, nil); r.IsError {
				t.Fatalf("task_finish: %q", text(r))
			}
			want := map[bool]string{true: extra}[tc.upstream]
			g.mu.Lock()
			defer g.mu.Unlock()
			q := g.asks[0]
			if q.GetQuestion() != "Which colour?"+want || len(q.GetQuestions()) != 1 || q.GetQuestions()[0].GetQuestion() != "Which colour?" {
				t.Errorf("question = %q, Questions = %v", q.GetQuestion(), q.GetQuestions())
			}
			if r := g.reports[0]; r.GetSummary() != "Painted."+want || len(r.GetQuestions()) != 1 || r.GetQuestions()[0].GetQuestion() != "Painted." {
				t.Errorf("report = %q, Questions = %v", r.GetSummary(), r.GetQuestions())
			}
		})
	}
}
