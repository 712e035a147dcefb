package srv_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Upstream's agentassistant-mcp (cmd/agentassistant-mcp/main.go,
// handleAskQuestion and handleWorkReport) calls AskQuestion and WorkReport
// with a plain connect-go client and no header of ours, and has no way to
// take an answer given after its call went away; upstream's web UI ignores
// RequestAgentStatus. So when such a call drops, its request is withdrawn
// at once and every device is told (RequestCancelled). A call from our
// bridge (TakesMissedHeader: 1) keeps today's behaviour: the request
// stays, answerable, for the agent's next call; any other value of the
// header is a caller that cannot take a missed answer.
func TestUpstreamMCPCallDroppedWithdraws(t *testing.T) {
	for _, kind := range []string{"AskQuestion", "WorkReport"} {
		t.Run(kind, func(t *testing.T) {
			s, url := newGuarded(t, srv.Options{Hub: hub.Options{OrphanGrace: time.Hour}})
			ui := login(t, url, tokA, "phone")
			agent := agentassistprotoconnect.NewSrvAgentAssistClient(&http.Client{}, url)
			call := func(ctx context.Context, id string) error {
				if kind == "AskQuestion" {
					_, err := agent.AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: tokA,
						Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/p", Question: "Keep the cache?", Timeout: 600}})
					return err
				}
				_, err := agent.WorkReport(ctx, &pb.WorkReportRequest{ID: id, UserToken: tokA,
					Request: &pb.McpWorkReportRequest{ProjectDirectory: "/p", Summary: "Done.", Timeout: 600}})
				return err
			}
			drop := func(ctx context.Context, id string) {
				t.Helper()
				ctx, cancel := context.WithCancel(ctx)
				asked := make(chan error, 1)
				go func() { asked <- call(ctx, id) }()
				if kind == "WorkReport" {
					expect(t, ui, "TaskFinish") // the same event under both names
				}
				expect(t, ui, kind)
				cancel() // the agent's process went away
				if err := <-asked; connect.CodeOf(err) != connect.CodeCanceled {
					t.Fatalf("call: %v", err)
				}
			}

			drop(context.Background(), "upstream-1")
			n := expect(t, ui, "RequestCancelled").GetRequestCancelledNotification()
			if n.GetRequestId() != "upstream-1" {
				t.Fatalf("cancelled: %v", n)
			}
			if s.Hub().Validity(tokA, []string{"upstream-1"})["upstream-1"] {
				t.Error("still pending after upstream's call dropped")
			}

			// Our bridge says it takes missed answers: the request stays.
			ours, info := connect.NewClientContext(context.Background())
			info.RequestHeader().Set(wire.TakesMissedHeader, "1")
			drop(ours, "ours-1")
			if !s.Hub().Validity(tokA, []string{"ours-1"})["ours-1"] {
				t.Error("our bridge's request was withdrawn when its call dropped")
			}

			// Only "1" says yes: any other value is a caller that cannot
			// take a missed answer.
			for _, v := range []string{"0", "true", "no"} {
				other, info := connect.NewClientContext(context.Background())
				info.RequestHeader().Set(wire.TakesMissedHeader, v)
				id := "other-" + v
				drop(other, id)
				if n := expect(t, ui, "RequestCancelled").GetRequestCancelledNotification(); n.GetRequestId() != id {
					t.Fatalf("header %q: cancelled %v", v, n)
				}
				if s.Hub().Validity(tokA, []string{id})[id] {
					t.Errorf("header %q: still pending after the call dropped", v)
				}
			}
		})
	}
}
