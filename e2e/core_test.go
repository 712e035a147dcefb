package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"io"
	"net/http"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

const (
	tokenA = "token-A-0123456789abcdef"
	tokenB = "token-B-0123456789abcdef"
	// a one-pixel PNG, base64
	pixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

func dial(t *testing.T, s *server, token, nick string) *wstest.Client {
	t.Helper()
	c, err := wstest.Dial(s.URL, token, nick, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.Login.GetSuccess() {
		t.Fatalf("login as %s refused: %v", nick, c.Login)
	}
	return c
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestAskQuestionThroughMCP: an MCP client asks, two browsers of the token
// see it, one answers with text and an image, the other is told; a client
// of another token sees nothing.
func TestAskQuestionThroughMCP(t *testing.T) {
	s := startServer(t, tokenA, tokenB)
	pc := dial(t, s, tokenA, "pc")
	phone := dial(t, s, tokenA, "phone")
	stranger := dial(t, s, tokenB, "stranger")
	agent := startMCP(t, s, tokenA)

	type res struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := callTool(context.Background(), agent, "ask_question", map[string]any{
			"question": "Which **database**?", "project_directory": "/src/shop",
		})
		done <- res{r, err}
	}()

	m := must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 10*time.Second))
	q := m.GetAskQuestionRequest()
	if q.GetRequest().GetQuestion() != "Which **database**?" || q.GetRequest().GetProjectDirectory() != "/src/shop" ||
		q.GetRequest().GetTimeout() != 600 || q.GetID() == "" {
		t.Fatalf("question = %v", q)
	}
	if m2 := must[*pb.WebsocketMessage](t)(phone.Expect("AskQuestion", 5*time.Second)); m2.GetAskQuestionRequest().GetID() != q.GetID() {
		t.Fatalf("phone got %v", m2)
	}

	reply := wstest.TextReply(q.GetID(), "PostgreSQL, please.")
	reply.AskQuestionResponse.Contents = append(reply.AskQuestionResponse.Contents, &pb.McpResultContent{
		Type: 2, Image: &pb.ImageContent{Type: "image", Data: pixelPNG, MimeType: "image/png"},
	})
	if err := pc.Send(reply); err != nil {
		t.Fatal(err)
	}

	var r res
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("MCP call did not return after the reply")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.r.IsError || len(r.r.Content) != 2 {
		t.Fatalf("result = %+v", r.r)
	}
	if txt, ok := mcp.AsTextContent(r.r.Content[0]); !ok || txt.Text != "PostgreSQL, please." {
		t.Errorf("first content = %+v", r.r.Content[0])
	}
	if img, ok := mcp.AsImageContent(r.r.Content[1]); !ok || img.Data != pixelPNG || img.MIMEType != "image/png" {
		t.Errorf("second content = %+v", r.r.Content[1])
	}

	n := must[*pb.WebsocketMessage](t)(phone.Expect("AskQuestionReplyNotification", 5*time.Second))
	if n.GetAskQuestionRequest().GetID() != q.GetID() || !strings.Contains(n.GetStrParam(), "pc") ||
		n.GetAskQuestionResponse().GetContents()[0].GetText().GetText() != "PostgreSQL, please." {
		t.Errorf("notification = %v", n)
	}
	if err := pc.Quiet(200 * time.Millisecond); err != nil {
		t.Errorf("answering client: %v", err)
	}
	if err := stranger.Quiet(200 * time.Millisecond); err != nil {
		t.Errorf("client of another token: %v", err)
	}

	// A late answer to the same question changes nothing and says why.
	if err := phone.Send(wstest.TextReply(q.GetID(), "MySQL")); err != nil {
		t.Fatal(err)
	}
	e := must[*pb.WebsocketMessage](t)(phone.Expect("Error", 5*time.Second))
	if e.GetError().GetCode() != "not_pending" || e.GetError().GetRequestId() != q.GetID() {
		t.Errorf("late answer error = %v", e.GetError())
	}
}

func TestTaskFinishThroughMCP(t *testing.T) {
	s := startServer(t, tokenA)
	ui := dial(t, s, tokenA, "pc")
	agent := startMCP(t, s, tokenA)

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := callTool(context.Background(), agent, "task_finish", map[string]any{"summary": "Added the login page.", "timeout": 120})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	m := must[*pb.WebsocketMessage](t)(ui.Expect("TaskFinish", 10*time.Second))
	tf := m.GetTaskFinishRequest()
	if tf.GetRequest().GetSummary() != "Added the login page." || tf.GetRequest().GetTimeout() != 120 {
		t.Fatalf("task = %v", tf)
	}
	if err := ui.Send(&pb.WebsocketMessage{
		Cmd:               "TaskFinishReply",
		TaskFinishRequest: &pb.TaskFinishRequest{ID: tf.GetID()},
		TaskFinishResponse: &pb.TaskFinishResponse{ID: tf.GetID(), Contents: []*pb.McpResultContent{
			{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Looks good. Now add logout."}},
			{Type: 2, Image: &pb.ImageContent{Type: "image", Data: pixelPNG, MimeType: "image/png"}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || r.IsError || resultText(r) != "Looks good. Now add logout." || len(r.Content) != 2 {
			t.Fatalf("result = %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("task_finish did not return")
	}
}

// TestCancelFromMCPWithdraws: the MCP client cancels its call; every UI of
// the token is told and the request is no longer pending.
func TestCancelFromMCPWithdraws(t *testing.T) {
	s := startServer(t, tokenA)
	ui := dial(t, s, tokenA, "pc")
	agent := startMCP(t, s, tokenA)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := callTool(ctx, agent, "ask_question", map[string]any{"question": "Still there?"})
		errc <- err
	}()
	q := must[*pb.WebsocketMessage](t)(ui.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled call returned no error")
	}
	n := must[*pb.WebsocketMessage](t)(ui.Expect("RequestCancelled", 10*time.Second)).GetRequestCancelledNotification()
	if n.GetRequestId() != q.GetID() || n.GetMessageType() != "AskQuestion" || n.GetReason() != "cancelled" {
		t.Errorf("cancel notification = %v", n)
	}
	if err := ui.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages", GetPendingMessagesRequest: &pb.GetPendingMessagesRequest{}}); err != nil {
		t.Fatal(err)
	}
	if p := must[*pb.WebsocketMessage](t)(ui.Expect("GetPendingMessages", 5*time.Second)).GetGetPendingMessagesResponse(); p.GetTotalCount() != 0 {
		t.Errorf("still pending: %v", p)
	}
}

// TestOutcomesAsText: timeout, wrong token and no server each reach the
// agent as a readable tool result.
func TestOutcomesAsText(t *testing.T) {
	s := startServer(t, tokenA)

	// The bridge clamps timeouts to at least 60s; the server honours what
	// it is sent, so a direct Connect call shows the server's timeout path.
	c := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, s.URL)
	_, err := c.AskQuestion(context.Background(), &pb.AskQuestionRequest{
		ID: "t1", UserToken: tokenA, Request: &pb.McpAskQuestionRequest{Question: "quick?", Timeout: 1},
	})
	if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Errorf("timeout: %v", err)
	}
	_, err = c.AskQuestion(context.Background(), &pb.AskQuestionRequest{
		ID: "t2", UserToken: "not-the-token", Request: &pb.McpAskQuestionRequest{Question: "hi"},
	})
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("wrong token on Connect: %v", err)
	}

	bad := startMCP(t, s, "not-the-token")
	r, err := callTool(context.Background(), bad, "ask_question", map[string]any{"question": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(resultText(r), "rejected the token") {
		t.Errorf("wrong token result: %+v", r)
	}

	gone := &server{Host: "127.0.0.1", Port: "1"}
	nobody := startMCP(t, gone, tokenA)
	r, err = callTool(context.Background(), nobody, "task_finish", map[string]any{"summary": "done"})
	if err != nil {
		t.Fatal(err)
	}
	if txt := resultText(r); !r.IsError || !strings.Contains(txt, "Could not reach agentassistant-srv at http://127.0.0.1:1") {
		t.Errorf("no server result: %q", txt)
	}

	r, err = callTool(context.Background(), bad, "ask_question", map[string]any{"question": "  "})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(resultText(r), "non-empty") {
		t.Errorf("empty question result: %+v", r)
	}
}

// TestRequestBeforeAnyClient: asked while no browser is open, the request
// is there for the first client to log in, and its answer gets through.
func TestRequestBeforeAnyClient(t *testing.T) {
	s := startServer(t, tokenA)
	c := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, s.URL)
	type res struct {
		r   *pb.AskQuestionResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := c.AskQuestion(context.Background(), &pb.AskQuestionRequest{
			ID: "early-1", UserToken: tokenA, Request: &pb.McpAskQuestionRequest{Question: "Asked into the void?", Timeout: 60},
		})
		done <- res{r, err}
	}()
	// The question is asked, with nobody online, before a client comes.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(metrics(t, s.URL, tokenA), `event="asked"} 1`); {
		if time.Now().After(deadline) {
			t.Fatal("the question was never asked")
		}
		time.Sleep(10 * time.Millisecond)
	}

	ui := dial(t, s, tokenA, "late")
	var pending *pb.GetPendingMessagesResponse
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := ui.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
			t.Fatal(err)
		}
		pending = must[*pb.WebsocketMessage](t)(ui.Expect("GetPendingMessages", 5*time.Second)).GetGetPendingMessagesResponse()
		if pending.GetTotalCount() > 0 {
			break
		}
	}
	if pending.GetTotalCount() != 1 {
		t.Fatalf("pending = %v", pending)
	}
	p := pending.GetPendingMessages()[0]
	if p.GetMessageType() != "AskQuestion" || p.GetAskQuestionRequest().GetID() != "early-1" || p.GetTimeout() != 60 || p.GetCreatedAt() == 0 {
		t.Fatalf("pending message = %v", p)
	}
	if err := ui.Send(&pb.WebsocketMessage{Cmd: "CheckMessageValidity",
		CheckMessageValidityRequest: &pb.CheckMessageValidityRequest{RequestIds: []string{"early-1", "nope"}}}); err != nil {
		t.Fatal(err)
	}
	v := must[*pb.WebsocketMessage](t)(ui.Expect("CheckMessageValidity", 5*time.Second)).GetCheckMessageValidityResponse().GetValidity()
	if !v["early-1"] || v["nope"] {
		t.Errorf("validity = %v", v)
	}
	if err := ui.Send(wstest.TextReply("early-1", "Heard you.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.GetContents()[0].GetText().GetText() != "Heard you." || r.r.GetID() != "early-1" {
			t.Fatalf("response = %v, %v", r.r, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no response")
	}
}

// TestReplyService: a client that is not on /ws answers through Connect.
func TestReplyService(t *testing.T) {
	s := startServer(t, tokenA, tokenB)
	ui := dial(t, s, tokenA, "pc")
	ask := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, s.URL)
	reply := agentassistprotoconnect.NewSrvAgentAssistReplyClient(http.DefaultClient, s.URL)
	done := make(chan *pb.TaskFinishResponse, 1)
	go func() {
		r, err := ask.TaskFinish(context.Background(), &pb.TaskFinishRequest{
			ID: "tf-1", UserToken: tokenA, Request: &pb.McpTaskFinishRequest{Summary: "done", Timeout: 60},
		})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	must[*pb.WebsocketMessage](t)(ui.Expect("TaskFinish", 10*time.Second))
	must[*pb.WebsocketMessage](t)(ui.Expect("WorkReport", 5*time.Second)) // the same, for the current upstream generation
	answer := &pb.TaskFinishResponse{ID: "tf-1", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "ok"}}}}

	_, err := reply.TaskFinishReply(context.Background(), &pb.TaskFinishReplyRequest{UserToken: tokenB, Response: answer})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("answer from another token: %v", err)
	}
	_, err = reply.TaskFinishReply(context.Background(), &pb.TaskFinishReplyRequest{UserToken: "wrong-token-xyz", Response: answer})
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("answer with a wrong token: %v", err)
	}
	if _, err := reply.TaskFinishReply(context.Background(), &pb.TaskFinishReplyRequest{UserToken: tokenA, Response: answer, Nickname: "watch"}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.GetContents()[0].GetText().GetText() != "ok" {
		t.Errorf("response = %v", r)
	}
	n := must[*pb.WebsocketMessage](t)(ui.Expect("TaskFinishReplyNotification", 5*time.Second))
	if !strings.Contains(n.GetStrParam(), "watch") {
		t.Errorf("notification = %v", n)
	}
	_, err = reply.TaskFinishReply(context.Background(), &pb.TaskFinishReplyRequest{UserToken: tokenA, Response: answer})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition || !strings.Contains(ce.Message(), "not pending") {
		t.Errorf("second answer: %v", err)
	}
}

// metrics is the server's /metrics text.
func metrics(t *testing.T, base, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("X-Agentassistant-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
