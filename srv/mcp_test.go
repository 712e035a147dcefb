package srv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/mcphttp"
)

// legacyVersion is the protocol MCP clients speak today (Claude Code,
// Cursor, the TypeScript SDK): sessions, and requests from the server.
const legacyVersion = "2025-11-25"

// mcpClient is an MCP client of /mcp with the token in its Authorization
// header.
func mcpClient(t *testing.T, base, token, query string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	c, err := mcpDial(base, token, query, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mcpDial(base, token, query string, opts ...client.ClientOption) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(base+"/mcp"+query, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, append([]client.ClientOption{client.WithProtocolVersion(legacyVersion)}, opts...)...)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "go-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func callTool(ctx context.Context, c *client.Client, name string, args map[string]any, progress any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	if progress != nil {
		req.Params.Meta = &mcp.Meta{ProgressToken: progress}
	}
	return c.CallTool(ctx, req)
}

func resultText(r *mcp.CallToolResult) string {
	var s []string
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

// TestMCPOverHTTP: the tools of agentassistant-mcp at /mcp, answered by a
// device of the token, with progress while the call waits.
func TestMCPOverHTTP(t *testing.T) {
	_, base := newGuarded(t, srv.Options{MCP: mcphttp.Options{Bridge: mcpbridge.Options{ProgressInterval: 20 * time.Millisecond}}})
	phone := login(t, base, tokA, "phone")
	c := mcpClient(t, base, tokA, "")
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, want := range []string{"ask_question", "task_finish", "work_report", "get_ui_state", "call_ui_tool", "start_session"} {
		if !names[want] {
			t.Errorf("tool %s missing from %v", want, names)
		}
	}

	progressed := make(chan struct{})
	var once sync.Once
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" && n.Params.AdditionalFields["progressToken"] == "p-1" {
			once.Do(func() { close(progressed) })
		}
	})
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := callTool(context.Background(), c, "ask_question", map[string]any{"question": "Which port?", "project_directory": "/srv/app"}, "p-1")
		done <- result{r, err}
	}()
	q := expect(t, phone, "AskQuestion")
	if q.GetAskQuestionRequest().GetRequest().GetQuestion() != "Which port?" || q.GetAskQuestionRequest().GetRequest().GetMcpClientName() != "go-test" {
		t.Fatalf("question = %v", q.GetAskQuestionRequest())
	}
	select {
	case <-progressed:
	case res := <-done:
		t.Fatalf("call ended before any progress: %v %v", res.r, res.err)
	}
	if err := phone.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "8080")); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.IsError || resultText(res.r) != "8080" {
		t.Fatalf("result = %v %v", res.r, res.err)
	}
}

// TestWorkReportOverHTTP: work_report, the name the current upstream
// generation's rules give agents, is a task report at /mcp too: the
// devices get it under both generations' Cmds and the answer is its result.
func TestWorkReportOverHTTP(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	c := mcpClient(t, base, tokA, "")
	call := goCall(c, "work_report", map[string]any{"project_directory": "/srv/shop", "summary": "Upgraded the **database**.",
		"agent_name": "Antigravity", "reasoning_model_name": "gemini-3-pro"})
	expect(t, phone, "TaskFinish")
	r := expect(t, phone, "WorkReport").GetTaskFinishRequest()
	if q := r.GetRequest(); q.GetSummary() != "Upgraded the **database**." || q.GetProjectDirectory() != "/srv/shop" ||
		q.GetAgentName() != "Antigravity" || q.GetReasoningModelName() != "gemini-3-pro" || q.GetMcpClientName() != "go-test" {
		t.Fatalf("report = %v", r)
	}
	if err := phone.Send(&pb.WebsocketMessage{Cmd: "WorkReportReply", TaskFinishRequest: &pb.TaskFinishRequest{ID: r.GetID()},
		TaskFinishResponse: &pb.TaskFinishResponse{ID: r.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Ship it."}}}}}); err != nil {
		t.Fatal(err)
	}
	if res := <-call; res.err != nil || res.r.IsError || resultText(res.r) != "Ship it." {
		t.Fatalf("result = %v %v", res.r, res.err)
	}
}

// TestMCPOverHTTPGuards: a request without the right token gets 401 before
// the MCP transport sees it (its body unread), saying what to send, a browser page of another
// site gets 403 even with the token, and a session is found only under
// the token and relay session that made it.
func TestMCPOverHTTPGuards(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	post := func(header map[string]string, body io.Reader, query string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/mcp"+query, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for name, h := range map[string]map[string]string{
		"no token":        {},
		"wrong token":     {"Authorization": "Bearer " + tokA + "x"},
		"wrong scheme":    {"Authorization": "Basic " + tokA},
		"the other token": {"Authorization": "Bearer room-Z-token-9999"},
	} {
		// The body never ends: the 401 comes without reading it.
		pr, pw := io.Pipe()
		resp := post(h, pr, "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
		// HTTP's 401 names its scheme (RFC 9110 15.5.2, RFC 6750 3).
		if got, invalid := resp.Header.Get("WWW-Authenticate"), name != "no token" && name != "wrong scheme"; !strings.HasPrefix(got, `Bearer realm="agentassistant"`) || invalid != strings.Contains(got, `error="invalid_token"`) {
			t.Errorf("%s: WWW-Authenticate %q", name, got)
		}
		// What an MCP client shows its user: what to send instead.
		if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "Authorization: Bearer") || !strings.Contains(string(b), "?token=") {
			t.Errorf("%s: the 401 says %q, not which token to send and how", name, b)
		}
		pw.Close()
	}
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "null", "https://" + strings.TrimPrefix(base, "http://")} {
		for _, tok := range []string{tokA, ""} {
			resp := post(map[string]string{"Authorization": "Bearer " + tok, "Origin": origin}, strings.NewReader(initBody), "")
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("Origin %s (token %v): %d", origin, tok != "", resp.StatusCode)
			}
		}
	}
	// The server's own origin, and no Origin (MCP clients send none), pass.
	for _, origin := range []string{base, ""} {
		resp := post(map[string]string{"Authorization": "Bearer " + tokA, "Origin": origin}, strings.NewReader(initBody), "")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Errorf("Origin %q: %d %v", origin, resp.StatusCode, resp.Header)
		}
	}

	resp := post(map[string]string{"Authorization": "Bearer " + tokA}, strings.NewReader(initBody), "")
	sid := resp.Header.Get("Mcp-Session-Id")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, tc := range []struct {
		name, token, query string
		want               int
	}{
		{"its own token", tokA, "", http.StatusOK},
		{"another token", tokB, "", http.StatusNotFound},
		{"another relay session", tokA, "?session=other", http.StatusNotFound},
		{"a bad relay session", tokA, "?session=" + strings.Repeat("x", 65), http.StatusBadRequest},
	} {
		resp := post(map[string]string{"Authorization": "Bearer " + tc.token, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": legacyVersion},
			strings.NewReader(list), tc.query)
		if resp.StatusCode != tc.want {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("session of token A with %s: %d %s, want %d", tc.name, resp.StatusCode, b, tc.want)
		}
	}
	// A stream needs a session.
	req, _ := http.NewRequest("GET", base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tokA)
	req.Header.Set("Accept", "text/event-stream")
	get, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusBadRequest {
		t.Errorf("GET without a session: %d", get.StatusCode)
	}
}

// TestMCPSessionsBounded: past max_mcp_sessions_per_token, a new session
// takes the place of the one unused the longest (which gets 404, so its
// client starts again); sessions with a call in progress are never taken,
// and when all are busy a new one is refused with 503.
func TestMCPSessionsBounded(t *testing.T) {
	_, base := newGuarded(t, srv.Options{MCP: mcphttp.Options{MaxSessions: 2}})
	phone := login(t, base, tokA, "phone")
	first := mcpClient(t, base, tokA, "")
	second := mcpClient(t, base, tokA, "?session=other")
	ctx := context.Background()
	if _, err := second.ListTools(ctx, mcp.ListToolsRequest{}); err != nil { // second is now the most recently used
		t.Fatal(err)
	}
	third := mcpClient(t, base, tokA, "")
	if _, err := third.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Errorf("second session: %v", err)
	}
	if _, err := first.ListTools(ctx, mcp.ListToolsRequest{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("the session unused the longest: %v, want 404", err)
	}
	// Another token's sessions do not count.
	mcpClient(t, base, tokB, "")

	// Both sessions of token A wait for an answer: no room for a third.
	calls := make(chan error, 2)
	for _, c := range []*client.Client{second, third} {
		go func() {
			_, err := callTool(ctx, c, "ask_question", map[string]any{"question": "busy?"}, nil)
			calls <- err
		}()
	}
	ids := []string{expect(t, phone, "AskQuestion").GetAskQuestionRequest().GetID(), expect(t, phone, "AskQuestion").GetAskQuestionRequest().GetID()}
	if _, err := mcpDial(base, tokA, ""); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a session while all are busy: %v, want 503", err)
	}
	for _, id := range ids {
		if err := phone.Send(wstest.TextReply(id, "done")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-calls; err != nil {
			t.Error(err)
		}
	}
	if _, err := mcpDial(base, tokA, ""); err != nil {
		t.Errorf("a session once one is idle: %v", err)
	}
}

// TestMCPOverHTTPClientGone: a client whose connection drops mid-call
// (restarted) leaves the question on the screens, and the answer goes to
// the project's next call, as with agentassistant-mcp when its client
// stops it.
func TestMCPOverHTTPClientGone(t *testing.T) {
	_, base := newGuarded(t, srv.Options{Hub: hub.Options{OrphanNotice: time.Millisecond}})
	phone := login(t, base, tokA, "phone")
	tablet := login(t, base, tokA, "tablet")
	c := mcpClient(t, base, tokA, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := callTool(ctx, c, "ask_question", map[string]any{"question": "Keep the logs?", "project_directory": "/srv/app"}, nil)
		done <- err
	}()
	id := expect(t, phone, "AskQuestion").GetAskQuestionRequest().GetID()
	cancel() // this client closes the request's stream and sends no cancel
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("call: %v", err)
	}
	if n := expect(t, phone, "RequestAgentStatus").GetRequestAgentStatusNotification(); n.GetRequestId() != id || !n.GetAgentGone() {
		t.Fatalf("agent status = %v", n)
	}
	if err := phone.Send(wstest.TextReply(id, "Keep them.")); err != nil {
		t.Fatal(err)
	}
	// The answer is taken (the other device is told) before the next call
	// looks for it.
	until(t, tablet, "AskQuestionReplyNotification")
	again := mcpClient(t, base, tokA, "")
	r, err := callTool(context.Background(), again, "ask_question", map[string]any{"question": "Rotate them?", "project_directory": "/srv/app"}, nil)
	if err != nil || !strings.Contains(resultText(r), "Keep the logs?") || !strings.Contains(resultText(r), "Keep them.") {
		t.Fatalf("next call: %v %v", resultText(r), err)
	}
}

// TestRefusedUnread: a request refused before its body is read (no token,
// a foreign Origin) is answered at once, its body never waited for, and
// the connection closed after the answer.
func TestRefusedUnread(t *testing.T) {
	_, base := newGuarded(t, srv.Options{BodyTimeout: time.Hour})
	for _, tc := range []struct{ path, header string }{
		{"/mcp", "Authorization: Bearer wrong-token-1234"},
		{"/mcp", "Authorization: Bearer " + tokA + "\r\nOrigin: http://evil.example"},
		{"/internal/send", "X-Agentassistant-Token: wrong-token-1234"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		// The body is announced and never sent.
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\nContent-Length: 100000\r\n\r\n", tc.path, tc.header)
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // against a hang; the answer comes at once
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s %s: no answer while the body is awaited: %v", tc.path, tc.header, err)
		} else if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden || !resp.Close {
			t.Errorf("%s %s: %d, close=%v", tc.path, tc.header, resp.StatusCode, resp.Close)
		}
		conn.Close()
	}
}

// TestMCPCallInProcess: a tool call over /mcp reaches the hub from the
// /mcp request itself, with no second HTTP hop into the server's own
// Connect services and no second pass of their guards. While a question
// asked over /mcp waits, the goroutine waiting for it in the hub runs no
// Connect handler.
func TestMCPCallInProcess(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	c := mcpClient(t, base, tokA, "")
	done := goCall(c, "ask_question", map[string]any{"question": "Which port?"})
	q := expect(t, phone, "AskQuestion")
	// The question is on the phone: its call is inside Hub.Ask until it
	// is answered.
	var waiting []string
	for _, g := range goroutines() {
		if strings.Contains(g, "srv/hub.(*Hub).Ask(") {
			waiting = append(waiting, g)
		}
	}
	if len(waiting) != 1 {
		t.Fatalf("%d goroutines wait in Hub.Ask, want the call's one", len(waiting))
	}
	for _, hop := range []string{"srv/rpc.(*preauth).ServeHTTP", "connectrpc.com/connect.(*Handler).ServeHTTP"} {
		if strings.Contains(waiting[0], hop) {
			t.Errorf("the call waits in the hub behind %s:\n%s", hop, waiting[0])
		}
	}
	if err := phone.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "8080")); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || resultText(res.r) != "8080" {
		t.Fatalf("result = %v %v", res.r, res.err)
	}
}

// goroutines are the stacks of every goroutine of the process.
func goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
