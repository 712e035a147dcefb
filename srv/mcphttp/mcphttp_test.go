package mcphttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/mcpbridge"
)

// newEndpoint serves a Handler whose bridges reach no server (the session
// table is what is tested here); the token is the request's ?t= (this MCP
// client sends its headers on every request but the DELETE).
func newEndpoint(t *testing.T, max int) (*Handler, string) {
	t.Helper()
	h := New(Options{Backend: func(string) mcpbridge.Backend { return noServer{} }, MaxSessions: max,
		TokenOf: func(r *http.Request) string { return r.URL.Query().Get("t") }})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		ts.Close()
	})
	return h, ts.URL
}

func dial(t *testing.T, base, token, query string) *client.Client {
	t.Helper()
	sep := "?"
	if query != "" {
		sep = "&"
	}
	tr, err := transport.NewStreamableHTTP(base + query + sep + "t=" + token)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion("2025-11-25"))
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(context.Background(), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// noServer is a backend whose server is away: every call is Unavailable.
type noServer struct{}

var errNoServer = errors.New("no server in this test")

func (noServer) AskQuestion(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, string, error) {
	return nil, "", connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) TaskReport(context.Context, *pb.WorkReportRequest) (*pb.AskQuestionResponse, string, error) {
	return nil, "", connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) TakeMissedAnswers(context.Context, *pb.TakeMissedAnswersRequest) (*pb.TakeMissedAnswersResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) CancelRequest(context.Context, *pb.CancelRequestRequest) error {
	return connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) AskQuestionReply(context.Context, *pb.AskQuestionReplyRequest) error {
	return connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) TaskFinishReply(context.Context, *pb.TaskFinishReplyRequest) error {
	return connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) GetUIState(context.Context, *pb.GetUIStateRequest) (*pb.GetUIStateResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) CallUITool(context.Context, string, string, map[string]any, string) (*pb.CallUIToolResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) PostAgentMessage(context.Context, *pb.AgentMessageRequest) (*pb.AgentMessageResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) WaitUserMessage(context.Context, *pb.WaitUserMessageRequest) (*pb.WaitUserMessageResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) StartSession(context.Context, *pb.StartSessionRequest) (*pb.SessionResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errNoServer)
}

func (noServer) EndSession(context.Context, *pb.EndSessionRequest) (*pb.SessionResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errNoServer)
}

// state is the table: bridges and sessions per token.
func (h *Handler) state() (bridges, sessions map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	bridges, sessions = map[string]int{}, map[string]int{}
	for _, rm := range h.rooms {
		bridges[rm.token], sessions[rm.token] = len(rm.bridges), rm.sessions.Len()
	}
	return bridges, sessions
}

func (h *Handler) bridgeOf(token, relay string) *bridge {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rm := range h.rooms {
		if rm.token == token {
			return rm.bridges[relay]
		}
	}
	return nil
}

// TestSessionTable: sessions are counted per token; a session that makes
// way for a new one is gone from the MCP server too, not only from the
// table; a bridge is freed with its last session; ended sessions leave
// nothing behind.
func TestSessionTable(t *testing.T) {
	h, base := newEndpoint(t, 2)
	a1 := dial(t, base, "token-a", "?session=one")
	sid1 := a1.GetSessionId()
	one := h.bridgeOf("token-a", "one")
	if one == nil || one.mcp.SendNotificationToSpecificClient(sid1, "notifications/message", map[string]any{}) != nil {
		t.Fatal("the first session is not registered")
	}
	a2 := dial(t, base, "token-a", "?session=one")
	b1 := dial(t, base, "token-b", "")
	if bs, ss := h.state(); bs["token-a"] != 1 || ss["token-a"] != 2 || ss["token-b"] != 1 {
		t.Fatalf("bridges %v sessions %v", bs, ss)
	}
	a3 := dial(t, base, "token-a", "")
	// a1 made way: the transport of its bridge, which serves a2 still,
	// forgot it too.
	if err := one.mcp.SendNotificationToSpecificClient(sid1, "notifications/message", map[string]any{}); !errors.Is(err, server.ErrSessionNotFound) {
		t.Errorf("the evicted session is still known: %v", err)
	}
	if bs, ss := h.state(); bs["token-a"] != 2 || ss["token-a"] != 2 {
		t.Errorf("after eviction: bridges %v sessions %v", bs, ss)
	}
	if _, err := a1.ListTools(context.Background(), mcp.ListToolsRequest{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("evicted session: %v", err)
	}
	if _, err := a2.ListTools(context.Background(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the other session of its bridge: %v", err)
	}
	for _, c := range []*client.Client{a1, a2, a3, b1} {
		c.Close() // DELETE
	}
	// A session's standalone stream (GET) ends on its own goroutine after
	// the DELETE is answered: its bridge is freed when it has.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		bs, ss := h.state()
		if len(bs) == 0 && len(ss) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every client left: bridges %v sessions %v", bs, ss)
		}
	}
}

// TestCloseEndsStreams: Close ends the listening streams and refuses what
// comes after.
func TestCloseEndsStreams(t *testing.T) {
	h, base := newEndpoint(t, 0)
	c := dial(t, base, "token-a", "")
	req, _ := http.NewRequest("GET", base+"?t=token-a", nil)
	req.Header.Set("Mcp-Session-Id", c.GetSessionId())
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", resp, err)
	}
	ended := make(chan struct{})
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				close(ended)
				return
			}
		}
	}()
	h.Close()
	<-ended
	resp.Body.Close()
	if _, err := c.ListTools(context.Background(), mcp.ListToolsRequest{}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("after Close: %v", err)
	}
}
