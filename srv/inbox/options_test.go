package inbox_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// TestOlderWebUIReadsTheOptions: upstream's web UI shows a request's text
// and nothing of its options (field 7, which it does not know), so the
// person there could not tell what the agent offers. It is found as it
// logs in (its first request is not GetPendingMessages), and from then on
// the text it is given names the options, in what it is pushed at once
// and in what comes later; a client that asks for the pending list (this
// project's web UI, which shows them as buttons) gets the text as asked.
func TestOlderWebUIReadsTheOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		opts := []*pb.Question{{Options: []*pb.Option{{Label: "PostgreSQL", Description: "the default"}, {Label: "SQLite"}}, Custom: true}}
		ask := func(kind wire.Kind, id, text string) {
			go func() {
				_, _ = f.hub.Ask(context.Background(), tokA, hub.Request{Kind: kind, ID: id, Text: text, Timeout: time.Hour, Questions: opts})
			}()
			synctest.Wait()
		}
		ask(wire.AskQuestion, "before", "Which database?")

		older := f.login(t, tokA, "聪明的开发者123")
		send(t, older, &pb.WebsocketMessage{Cmd: wire.CmdGetOnlineUsers})
		ours := f.login(t, tokA, "laptop")
		send(t, ours, &pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages})

		named := func(text string) bool {
			return strings.Contains(text, "PostgreSQL") && strings.Contains(text, "the default") && strings.Contains(text, "SQLite")
		}
		if q := expect(t, older, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest(); !strings.HasPrefix(q.GetQuestion(), "Which database?") || !named(q.GetQuestion()) {
			t.Errorf("pushed at login, the older web UI reads %q", q.GetQuestion())
		}
		ask(wire.AskQuestion, "after", "Which cache?")
		if q := expect(t, older, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest(); !strings.HasPrefix(q.GetQuestion(), "Which cache?") || !named(q.GetQuestion()) {
			t.Errorf("asked later, the older web UI reads %q", q.GetQuestion())
		}
		ask(wire.TaskFinish, "report", "Done.")
		for _, cmd := range []string{wire.CmdTaskFinish, wire.CmdWorkReport} {
			if r := expect(t, older, cmd).GetTaskFinishRequest().GetRequest(); !strings.HasPrefix(r.GetSummary(), "Done.") || !named(r.GetSummary()) {
				t.Errorf("a report under %s, the older web UI reads %q", cmd, r.GetSummary())
			}
		}

		for _, p := range expect(t, ours, wire.CmdGetPendingMessages).GetGetPendingMessagesResponse().GetPendingMessages() {
			if q := p.GetAskQuestionRequest().GetRequest(); q.GetQuestion() != "Which database?" || len(q.GetQuestions()) != 1 {
				t.Errorf("the pending list gives %v", q)
			}
		}
		if q := expect(t, ours, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest(); q.GetQuestion() != "Which cache?" || len(q.GetQuestions()) != 1 {
			t.Errorf("a client that asks for the pending list reads %q", q.GetQuestion())
		}
	})
}
