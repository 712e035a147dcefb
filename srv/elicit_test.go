package srv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv"
)

// form is an elicitation as the client received it, with its JSON-RPC id.
type form struct {
	id      string
	message string
	answer  chan *mcp.ElicitationResult
}

// formClient is an MCP client that shows forms: each elicitation arrives
// on forms and waits for an answer; notifications/cancelled the server
// sends arrive on cancels (their requestId).
type formClient struct {
	*client.Client
	forms   chan form
	cancels chan string
	logs    chan string // notifications/message
}

// startFormClient starts an MCP client over tr that declares form
// elicitation, on the protocol that has server requests.
func startFormClient(t *testing.T, tr transport.BidirectionalInterface) *formClient {
	t.Helper()
	fc := &formClient{Client: client.NewClient(tr, client.WithProtocolVersion(legacyVersion)),
		forms: make(chan form, 4), cancels: make(chan string, 4), logs: make(chan string, 16)}
	t.Cleanup(func() { fc.Close() })
	ctx := context.Background()
	if err := fc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// In place of the client's own handler, to see each request's id.
	tr.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if req.Method != string(mcp.MethodElicitationCreate) {
			return nil, fmt.Errorf("unexpected %s", req.Method)
		}
		b, _ := json.Marshal(req.Params)
		var p mcp.ElicitationParams
		_ = json.Unmarshal(b, &p)
		f := form{id: fmt.Sprint(req.ID.Value()), message: p.Message, answer: make(chan *mcp.ElicitationResult, 1)}
		fc.forms <- f
		select {
		case res := <-f.answer:
			b, _ := json.Marshal(res)
			return transport.NewJSONRPCResultResponse(req.ID, b), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	fc.OnNotification(func(n mcp.JSONRPCNotification) {
		ch, v := fc.logs, fmt.Sprint(n.Params.AdditionalFields["data"])
		switch n.Method {
		case string(mcp.MethodNotificationCancelled):
			ch, v = fc.cancels, fmt.Sprint(n.Params.AdditionalFields["requestId"], " ", n.Params.AdditionalFields["reason"])
		case "notifications/message":
		default:
			return
		}
		select { // never hold up the client's reader
		case ch <- v:
		default:
		}
	})
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "form-client", Version: "1"}
	init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
	if _, err := fc.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return fc
}

func (fc *formClient) nextForm(t *testing.T) form {
	t.Helper()
	select {
	case f := <-fc.forms:
		return f
	case <-time.After(10 * time.Second): // against a hang
		t.Fatal("no form in the client")
	}
	return form{}
}

func (fc *formClient) nextCancel(t *testing.T) string {
	t.Helper()
	select {
	case c := <-fc.cancels:
		return c
	case <-time.After(10 * time.Second): // against a hang
		t.Fatal("the form was not withdrawn")
	}
	return ""
}

func accept(answer string) *mcp.ElicitationResult {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"answer": answer}}}
}

type toolCall struct {
	r   *mcp.CallToolResult
	err error
}

func goCall(c *client.Client, name string, args map[string]any) chan toolCall {
	done := make(chan toolCall, 1)
	go func() {
		r, err := callTool(context.Background(), c, name, args, nil)
		done <- toolCall{r, err}
	}()
	return done
}

// checkForms runs the two races of a question offered both in the client
// and in the inbox, through whichever transport fc uses.
func checkForms(t *testing.T, fc *formClient, phone *wstest.Client) {
	t.Helper()
	// 1. The client's form answers first: the call returns its answer, the
	// inbox shows who answered.
	call := goCall(fc.Client, "ask_question", map[string]any{"question": "Which **port**?"})
	q := expect(t, phone, "AskQuestion").GetAskQuestionRequest()
	f := fc.nextForm(t)
	if !strings.HasPrefix(f.message, "Which **port**?") || !strings.Contains(f.message, "inbox") {
		t.Errorf("form message = %q", f.message)
	}
	f.answer <- accept("Port 9000.")
	n := expect(t, phone, "AskQuestionReplyNotification")
	if n.GetAskQuestionRequest().GetID() != q.GetID() || n.GetNickname() != mcpbridge.ClientNickname+" (form-client)" {
		t.Errorf("the inbox was told %q answered %s", n.GetNickname(), n.GetAskQuestionRequest().GetID())
	}
	res := <-call
	if res.err != nil || res.r.IsError || resultText(res.r) != "Port 9000." {
		t.Fatalf("result = %v %v", res.r, res.err)
	}

	// 2. The inbox answers first: the form is withdrawn (the client gets
	// notifications/cancelled for that very request), and the result says
	// where the person answered.
	call = goCall(fc.Client, "task_finish", map[string]any{"summary": "Moved the service to port 9000."})
	tq := expect(t, phone, "TaskFinish").GetTaskFinishRequest()
	expect(t, phone, "WorkReport") // the same report under the current generation's name
	f = fc.nextForm(t)
	if !strings.Contains(f.message, "Moved the service") {
		t.Errorf("form message = %q", f.message)
	}
	if err := phone.Send(&pb.WebsocketMessage{Cmd: "TaskFinishReply", TaskFinishRequest: &pb.TaskFinishRequest{ID: tq.GetID()},
		TaskFinishResponse: &pb.TaskFinishResponse{ID: tq.GetID(), Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: "Thanks."}}}}}); err != nil {
		t.Fatal(err)
	}
	res = <-call
	if res.err != nil || res.r.IsError || !strings.HasPrefix(resultText(res.r), "Thanks.") ||
		!strings.Contains(resultText(res.r), "answered on the phone/PC (phone)") {
		t.Fatalf("result = %q %v", resultText(res.r), res.err)
	}
	if c := fc.nextCancel(t); c != f.id+" answered on the phone/PC (phone)" {
		t.Errorf("withdrawn: %q, want form %s", c, f.id)
	}

	// 3. A dismissed form leaves the question in the inbox.
	call = goCall(fc.Client, "ask_question", map[string]any{"question": "Deploy now?"})
	q = expect(t, phone, "AskQuestion").GetAskQuestionRequest()
	fc.nextForm(t).answer <- &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
	for l := ""; !strings.Contains(l, "dismissed"); {
		select {
		case l = <-fc.logs:
		case <-time.After(10 * time.Second): // against a hang
			t.Fatal("the dismissal was not noted")
		}
	}
	if err := phone.Send(wstest.TextReply(q.GetID(), "Not yet.")); err != nil {
		t.Fatal(err)
	}
	if res := <-call; res.err != nil || resultText(res.r) != "Not yet." {
		t.Fatalf("after a dismissed form: %v %v", res.r, res.err)
	}
}

// TestFormsOverHTTP: ask_question and task_finish are offered in the
// agent's client as a form too, over /mcp; the first answer wins.
func TestFormsOverHTTP(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokA}))
	if err != nil {
		t.Fatal(err)
	}
	checkForms(t, startFormClient(t, tr), phone)
}

// TestFormsOverStdio: the same through agentassistant-mcp's stdio server,
// in a process of its own as agentassistant-mcp is (the MCP library keeps
// one stdio session per process).
func TestFormsOverStdio(t *testing.T) {
	if base := os.Getenv("AA_TEST_STDIO_BRIDGE"); base != "" {
		serveStdio(base)
		return
	}
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	tr := transport.NewStdio(os.Args[0], []string{"AA_TEST_STDIO_BRIDGE=" + base}, "-test.run=^TestFormsOverStdio$")
	checkForms(t, startFormClient(t, tr), phone)
}

// serveStdio is the child process of TestFormsOverStdio: the bridge on
// stdin and stdout until stdin ends.
func serveStdio(base string) {
	b := mcpbridge.New(mcpbridge.Options{
		Client: agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, base),
		Reply:  agentassistprotoconnect.NewSrvAgentAssistReplyClient(http.DefaultClient, base),
		Token:  tokA, ServerURL: base,
	})
	_ = server.NewStdioServer(b.MCPServer).Listen(context.Background(), os.Stdin, os.Stdout)
}

// TestFormAnswerNotLost: an answer typed in the client's form that cannot
// go in through the server (an older server without the reply service)
// is the call's result, and the question leaves the inbox.
func TestFormAnswerNotLost(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	b := mcpbridge.New(mcpbridge.Options{
		Client:  agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, base),
		Control: agentassistprotoconnect.NewSrvAgentAssistControlClient(http.DefaultClient, base),
		Reply:   unimplementedReply{},
		Token:   tokA, ServerURL: base,
	})
	seen := make(chan struct{})
	c, err := client.NewInProcessClientWithOptions(b.MCPServer, client.WithElicitationHandler(elicitFunc(func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		<-seen // the person types once the question is on the phone too
		return accept("Use the blue one."), nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = legacyVersion
	init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
	if _, err := c.Initialize(context.Background(), init); err != nil {
		t.Fatal(err)
	}
	call := goCall(c, "ask_question", map[string]any{"question": "Which colour?"})
	q := expect(t, phone, "AskQuestion").GetAskQuestionRequest()
	close(seen)
	res := <-call
	if res.err != nil || resultText(res.r) != "Use the blue one." {
		t.Fatalf("result = %v %v", res.r, res.err)
	}
	if n := expect(t, phone, "RequestCancelled").GetRequestCancelledNotification(); n.GetRequestId() != q.GetID() {
		t.Errorf("cancelled = %v", n)
	}
}

type elicitFunc func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f elicitFunc) Elicit(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, r)
}

type unimplementedReply struct{}

func (unimplementedReply) AskQuestionReply(context.Context, *pb.AskQuestionReplyRequest) (*pb.MsgEmpty, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("404 Not Found"))
}

func (unimplementedReply) TaskFinishReply(context.Context, *pb.TaskFinishReplyRequest) (*pb.MsgEmpty, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("404 Not Found"))
}

// TestFormsOneAtATime: two calls at once in one client: the second form
// comes when the first one closes, and each withdrawal names its own
// form (the bridge numbers them as the MCP library does).
func TestFormsOneAtATime(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokA}))
	if err != nil {
		t.Fatal(err)
	}
	fc := startFormClient(t, tr)
	calls := map[string]chan toolCall{}
	ids := map[string]string{}
	for _, q := range []string{"First: tabs or spaces?", "Second: light or dark?"} {
		calls[q] = goCall(fc.Client, "ask_question", map[string]any{"question": q})
		r := expect(t, phone, "AskQuestion").GetAskQuestionRequest()
		ids[r.GetRequest().GetQuestion()] = r.GetID()
	}
	for range 2 {
		f := fc.nextForm(t)
		q := strings.SplitN(f.message, "\n", 2)[0]
		if err := phone.Send(wstest.TextReply(ids[q], "from the phone")); err != nil {
			t.Fatal(err)
		}
		if c := fc.nextCancel(t); c != f.id+" answered on the phone/PC (phone)" {
			t.Errorf("withdrawn %q, want form %s (%s)", c, f.id, q)
		}
		if res := <-calls[q]; res.err != nil || !strings.HasPrefix(resultText(res.r), "from the phone") {
			t.Errorf("%s: %v %v", q, res.r, res.err)
		}
	}
}
