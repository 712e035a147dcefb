package srv_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestMissedAnswersOverConnect: an answer given after the agent's call went
// away is handed over once, through SrvAgentAssistControl, to a call of the
// same token and project, never to another token; the call's input is
// bounded.
func TestMissedAnswersOverConnect(t *testing.T) {
	_, url := newGuarded(t, srv.Options{Hub: hub.Options{OrphanNotice: time.Millisecond}})
	ui := login(t, url, tokA, "phone")
	agent := agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, url)
	ctl := agentassistprotoconnect.NewSrvAgentAssistControlClient(http.DefaultClient, url)

	ctx, cancel := context.WithCancel(context.Background())
	ctx, info := connect.NewClientContext(ctx)
	info.RequestHeader().Set(wire.TakesMissedHeader, "1") // as agentassistant-mcp: it takes missed answers
	asked := make(chan error, 1)
	go func() {
		_, err := agent.AskQuestion(ctx, &pb.AskQuestionRequest{ID: "q-1", UserToken: tokA,
			Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/p", Question: "Keep the cache?", Timeout: 600}})
		asked <- err
	}()
	expect(t, ui, "AskQuestion")
	cancel() // the agent's process went away
	<-asked
	if n := expect(t, ui, "RequestAgentStatus").GetRequestAgentStatusNotification(); n.GetRequestId() != "q-1" || !n.GetAgentGone() {
		t.Fatalf("agent status = %v", n)
	}
	if err := ui.Send(wstest.TextReply("q-1", "Keep it.")); err != nil {
		t.Fatal(err)
	}
	if err := ui.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages"}); err != nil {
		t.Fatal(err)
	}
	if ps := expect(t, ui, "GetPendingMessages").GetGetPendingMessagesResponse(); len(ps.GetPendingMessages()) != 0 { // an Error frame (refused) fails expect
		t.Fatalf("still pending: %v", ps)
	}

	take := func(tok, project string, except ...string) (*pb.TakeMissedAnswersResponse, error) {
		return ctl.TakeMissedAnswers(context.Background(), &pb.TakeMissedAnswersRequest{UserToken: tok, ProjectDirectory: project, ExceptIds: except})
	}
	if r, err := take(tokB, "/p"); err != nil || len(r.GetAnswers()) != 0 {
		t.Fatalf("another token: %v %v", r, err)
	}
	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	if _, err := take(tokA, "/p", many...); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("257 except_ids: %v", err)
	}
	r, err := take(tokA, "/p")
	if err != nil || len(r.GetAnswers()) != 1 {
		t.Fatalf("take: %v %v", r, err)
	}
	a := r.GetAnswers()[0]
	if a.GetID() != "q-1" || a.GetMessageType() != "AskQuestion" || a.GetText() != "Keep the cache?" || a.GetAnsweredBy() != "phone" ||
		a.GetResponse().GetContents()[0].GetText().GetText() != "Keep it." || a.GetAnsweredAt() < a.GetCreatedAt() {
		t.Fatalf("answer = %v", a)
	}
	if r, err := take(tokA, "/p"); err != nil || len(r.GetAnswers()) != 0 {
		t.Fatalf("taken twice: %v %v", r, err)
	}
}
