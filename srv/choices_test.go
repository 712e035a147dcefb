package srv_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
)

// TestOptionsOverMCP: a question asked at /mcp with options reaches a /ws
// device with them in McpAskQuestionRequest.Questions (field 7); the
// device answers with an option's label and free text, and the agent gets
// the choice in words and as structured content.
func TestOptionsOverMCP(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	c := mcpClient(t, base, tokA, "")
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := callTool(context.Background(), c, "ask_question", map[string]any{
			"question": "Deploy now?", "allow_other": true,
			"options": []any{map[string]any{"label": "Deploy", "description": "ship to production"}, map[string]any{"label": "Wait"}},
		}, nil)
		done <- result{r, err}
	}()
	q := expect(t, phone, "AskQuestion")
	qs := q.GetAskQuestionRequest().GetRequest().GetQuestions()
	if len(qs) != 1 || len(qs[0].GetOptions()) != 2 || qs[0].GetOptions()[0].GetLabel() != "Deploy" ||
		qs[0].GetOptions()[0].GetDescription() != "ship to production" || qs[0].GetMultiple() || !qs[0].GetCustom() {
		t.Fatalf("the device got Questions %v", qs)
	}
	id := q.GetAskQuestionRequest().GetID()
	if err := phone.Send(&pb.WebsocketMessage{Cmd: "AskQuestionReply", AskQuestionRequest: &pb.AskQuestionRequest{ID: id},
		AskQuestionResponse: &pb.AskQuestionResponse{ID: id, Contents: []*pb.McpResultContent{
			{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Wait"}},
			{Type: 1, Text: &pb.TextContent{Type: "text", Text: "until the backup ends"}},
		}}}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.IsError {
		t.Fatalf("result = %v %v", res.r, res.err)
	}
	if got := resultText(res.r); got != "The person chose the option \"Wait\".\nuntil the backup ends" {
		t.Errorf("text = %q", got)
	}
	b, _ := json.Marshal(res.r.StructuredContent)
	var a struct {
		Chosen []string `json:"chosen"`
		Text   string   `json:"text"`
	}
	if err := json.Unmarshal(b, &a); err != nil || strings.Join(a.Chosen, "|") != "Wait" || a.Text != "until the backup ends" {
		t.Errorf("structured content = %s", b)
	}
}

// TestOptionsInTheClientsForm: over /mcp, a client that shows forms gets
// the options as an array of enums (multi_select); choosing two there
// answers the call with both, and the inbox's devices are told the same
// labels.
func TestOptionsInTheClientsForm(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokA}))
	if err != nil {
		t.Fatal(err)
	}
	fc := startFormClient(t, tr)
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := callTool(context.Background(), fc.Client, "task_finish", map[string]any{
			"summary": "Refactored the cart.", "multi_select": true, "allow_other": false,
			"options": []any{map[string]any{"label": "Run the tests again"}, map[string]any{"label": "Update the docs"}, map[string]any{"label": "Stop"}},
		}, nil)
		done <- result{r, err}
	}()
	expect(t, phone, "TaskFinish")
	expect(t, phone, "WorkReport") // the same report under the current generation's Cmd
	f := fc.nextForm(t)
	f.answer <- &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"choice": []any{"Stop", "Run the tests again"}}}}
	res := <-done
	if res.err != nil || res.r.IsError || resultText(res.r) != `The person chose the options "Run the tests again", "Stop".` {
		t.Fatalf("result = %v %v", res.r, res.err)
	}
	b, _ := json.Marshal(res.r.StructuredContent)
	if !strings.Contains(string(b), `"chosen":["Run the tests again","Stop"]`) {
		t.Errorf("structured content = %s", b)
	}
	n := expect(t, phone, "TaskFinishReplyNotification")
	var got []string
	for _, c := range n.GetTaskFinishResponse().GetContents() {
		got = append(got, c.GetText().GetText())
	}
	if strings.Join(got, "|") != "Stop|Run the tests again" {
		t.Errorf("the inbox was told %q", got)
	}
}

// TestOnlyTheOfferedOptions: a question asked at /mcp with options and
// allow_other false takes only an option, whatever the door: the typed
// answer of a /ws device that shows the options (as this project's UI
// says at login; one that does not has it taken as written, see
// srv/inbox TestOlderWebUITypedAnswerIsTaken) gets an Error frame
// (invalid_request, naming the options), a Connect reply with two labels of a single choice
// invalid_argument; the question stays pending on every device, and the
// agent gets the option chosen next.
func TestOnlyTheOfferedOptions(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := loginShowingOptions(t, base, tokA, "phone")
	c := mcpClient(t, base, tokA, "")
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := callTool(context.Background(), c, "ask_question", map[string]any{
			"question": "Deploy now?", "allow_other": false,
			"options": []any{map[string]any{"label": "Deploy"}, map[string]any{"label": "Wait"}},
		}, nil)
		done <- result{r, err}
	}()
	id := expect(t, phone, "AskQuestion").GetAskQuestionRequest().GetID()
	text := func(ts ...string) []*pb.McpResultContent {
		var cs []*pb.McpResultContent
		for _, s := range ts {
			cs = append(cs, &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: s}})
		}
		return cs
	}
	send := func(contents []*pb.McpResultContent) {
		t.Helper()
		if err := phone.Send(&pb.WebsocketMessage{Cmd: "AskQuestionReply", AskQuestionRequest: &pb.AskQuestionRequest{ID: id},
			AskQuestionResponse: &pb.AskQuestionResponse{ID: id, Contents: contents}}); err != nil {
			t.Fatal(err)
		}
	}
	send(text("Deploy, then drop the staging database"))
	if e := expect(t, phone, "Error").GetError(); e.GetCode() != "invalid_request" || e.GetRequestId() != id || !strings.Contains(e.GetMessage(), `"Deploy", "Wait"`) {
		t.Fatalf("a typed answer on /ws: Error %v", e)
	}
	reply := agentassistprotoconnect.NewSrvAgentAssistReplyClient(http.DefaultClient, base)
	_, err := reply.AskQuestionReply(context.Background(), &pb.AskQuestionReplyRequest{UserToken: tokA,
		Response: &pb.AskQuestionResponse{ID: id, Contents: text("Deploy", "Wait")}})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("two labels of one choice over Connect: %v, want invalid_argument", err)
	}
	send(text("Wait"))
	res := <-done
	if res.err != nil || res.r.IsError || resultText(res.r) != `The person chose the option "Wait".` {
		t.Fatalf("result = %v %v", res.r, res.err)
	}
}

// TestFormAnswerOutsideTheOptions: a client's form accepted with nothing
// chosen on a report that takes only its options (several may be chosen,
// so the form cannot require one) is not an answer: the server refuses
// it, and the call neither ends with it as if the person had answered
// nor loses the request, which still waits in the inbox; the phone's
// option then answers the call.
func TestFormAnswerOutsideTheOptions(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	phone := login(t, base, tokA, "phone")
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokA}))
	if err != nil {
		t.Fatal(err)
	}
	fc := startFormClient(t, tr)
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := callTool(context.Background(), fc.Client, "task_finish", map[string]any{
			"summary": "Refactored the cart.", "multi_select": true, "allow_other": false,
			"options": []any{map[string]any{"label": "Run the tests again"}, map[string]any{"label": "Stop"}},
		}, nil)
		done <- result{r, err}
	}()
	id := expect(t, phone, "TaskFinish").GetTaskFinishRequest().GetID()
	expect(t, phone, "WorkReport")
	f := fc.nextForm(t)
	f.answer <- &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{}}}
	// The client is told its form's answer was not taken; the call goes on.
	for told := false; !told; {
		select {
		case res := <-done:
			t.Fatalf("the call ended with the form's empty answer: %q %v", resultText(res.r), res.err)
		case l := <-fc.logs:
			told = strings.Contains(l, "not taken")
		case <-time.After(10 * time.Second): // against a hang
			t.Fatal("the client was not told")
		}
	}
	// Still pending: the phone's answer is taken, and is the call's.
	if err := phone.Send(&pb.WebsocketMessage{Cmd: "TaskFinishReply", TaskFinishRequest: &pb.TaskFinishRequest{ID: id},
		TaskFinishResponse: &pb.TaskFinishResponse{ID: id, Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Stop"}}}}}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.IsError || !strings.HasPrefix(resultText(res.r), `The person chose the option "Stop".`) {
		t.Fatalf("result = %q %v, want the phone's option", resultText(res.r), res.err)
	}
}

// loginShowingOptions logs in as this project's UI does: saying it shows
// a request's options.
func loginShowingOptions(t *testing.T, url, tok, nick string) *wstest.Client {
	t.Helper()
	c, err := wstest.Connect(nil, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.ShowsOptions = true
	if err := c.LogIn(tok, nick, "", 0); err != nil || !c.Login.GetSuccess() {
		t.Fatalf("login: %v %v", err, c.Login)
	}
	return c
}
