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

// TestOlderWebUIReadsTheOptions: upstream's web UI and Flutter app show a
// request's text and nothing of its options (field 7, which they do not
// know), so the person there could not tell what the agent offers. A
// client that does not say at login that it shows options is given them
// in the text: in what it is pushed at once (the web UI, whose first
// request is not GetPendingMessages), in the pending list it asks for
// (the Flutter app) and in what comes later; a client that says so (this
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
		flutter := f.login(t, tokA, "phone")
		send(t, flutter, &pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages})
		ours := f.connect(t)
		ours.ShowsOptions = true
		if err := ours.LogIn(tokA, "laptop", "", 0); err != nil || !ours.Login.GetSuccess() {
			t.Fatalf("login: %v %v", err, ours.Login)
		}
		send(t, ours, &pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages})
		// Its answer before anything is asked: the question asked next
		// must not come first.
		ourList := expect(t, ours, wire.CmdGetPendingMessages).GetGetPendingMessagesResponse().GetPendingMessages()

		named := func(text string) bool {
			return strings.Contains(text, "PostgreSQL") && strings.Contains(text, "the default") && strings.Contains(text, "SQLite")
		}
		if q := expect(t, older, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest(); !strings.HasPrefix(q.GetQuestion(), "Which database?") || !named(q.GetQuestion()) {
			t.Errorf("pushed at login, the older web UI reads %q", q.GetQuestion())
		}
		ps := expect(t, flutter, wire.CmdGetPendingMessages).GetGetPendingMessagesResponse().GetPendingMessages()
		if len(ps) != 1 || !strings.HasPrefix(ps[0].GetAskQuestionRequest().GetRequest().GetQuestion(), "Which database?") || !named(ps[0].GetAskQuestionRequest().GetRequest().GetQuestion()) {
			t.Errorf("the Flutter app's pending list gives %v", ps)
		}
		ask(wire.AskQuestion, "after", "Which cache?")
		if q := expect(t, flutter, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest(); !strings.HasPrefix(q.GetQuestion(), "Which cache?") || !named(q.GetQuestion()) {
			t.Errorf("asked later, the Flutter app reads %q", q.GetQuestion())
		}
		if q := expect(t, older, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest(); !strings.HasPrefix(q.GetQuestion(), "Which cache?") || !named(q.GetQuestion()) {
			t.Errorf("asked later, the older web UI reads %q", q.GetQuestion())
		}
		ask(wire.TaskFinish, "report", "Done.")
		for _, cmd := range []string{wire.CmdTaskFinish, wire.CmdWorkReport} {
			if r := expect(t, older, cmd).GetTaskFinishRequest().GetRequest(); !strings.HasPrefix(r.GetSummary(), "Done.") || !named(r.GetSummary()) {
				t.Errorf("a report under %s, the older web UI reads %q", cmd, r.GetSummary())
			}
		}

		for _, p := range ourList {
			if q := p.GetAskQuestionRequest().GetRequest(); q.GetQuestion() != "Which database?" || len(q.GetQuestions()) != 1 {
				t.Errorf("the pending list gives %v", q)
			}
		}
		if q := expect(t, ours, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest(); q.GetQuestion() != "Which cache?" || len(q.GetQuestions()) != 1 {
			t.Errorf("a client that shows options reads %q", q.GetQuestion())
		}
	})
}

// TestOptionsTextOneLabelALine: the options written into the text for a
// client that does not show them are one label a line under the one
// heading the server writes, whatever the labels and descriptions hold
// (a request kept from before labels were checked, or a caller of the
// hub that checks nothing): no line break, separator or bidirectional
// control gets through to start a line of its own or turn one around,
// and ten options at their limits make a bounded text.
func TestOptionsTextOneLabelALine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		spoof := "\n\nAnswer with one of:\n- rm -rf /"
		opts := []*pb.Option{
			{Label: "Yes" + spoof, Description: "fine\r\n- No (\u202esdrawkcab)"},
			{Label: "\u2066No\u2069\u2028- Maybe", Description: "para\u2029- Later"},
		}
		for i := len(opts); i < wire.MaxOptions; i++ {
			opts = append(opts, &pb.Option{Label: strings.Repeat(string(rune('a'+i)), wire.MaxLabelBytes),
				Description: strings.Repeat("d", wire.MaxDescriptionBytes)})
		}
		go func() {
			_, _ = f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Go on?", Timeout: time.Hour,
				Questions: []*pb.Question{{Options: opts}}})
		}()
		synctest.Wait()
		older := f.login(t, tokA, "older")
		send(t, older, &pb.WebsocketMessage{Cmd: wire.CmdGetOnlineUsers})
		text := expect(t, older, wire.CmdAskQuestion).GetAskQuestionRequest().GetRequest().GetQuestion()
		extra, ok := strings.CutPrefix(text, "Go on?\n\nAnswer with one of:\n")
		if !ok {
			t.Fatalf("the text reads %q", text)
		}
		lines := strings.Split(extra, "\n")
		if len(lines) != wire.MaxOptions {
			t.Errorf("%d options written as %d lines: %q", wire.MaxOptions, len(lines), extra)
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "- ") || strings.ContainsAny(l, "\r\u0085\u2028\u2029\u202e\u2066\u2069") {
				t.Errorf("a line of the options reads %q", l)
			}
		}
		if strings.Count(text, "\nAnswer with one of") != 1 {
			t.Errorf("a line of its own reads as the heading again: %q", text)
		}
		if max := wire.MaxOptions * (len("\n- ") + wire.MaxLabelBytes + len(" ()") + wire.MaxDescriptionBytes); len(extra) > max {
			t.Errorf("the options take %d bytes of text, more than %d", len(extra), max)
		}
	})
}

// TestOlderWebUITypedAnswerIsTaken: upstream's web UI shows a question
// that takes only its options as text, and marks its card answered as
// soon as the person sends what they typed; it knows no Error frame, so
// a refusal would leave the person believing they answered while the
// agent waits on. A client that does not say it shows options has its
// typed answer taken as written, as upstream's own server takes it; one
// that shows them is refused, and the question stays.
func TestOlderWebUITypedAnswerIsTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		older := f.login(t, tokA, "聪明的开发者123")
		ours := f.connect(t)
		ours.ShowsOptions = true
		if err := ours.LogIn(tokA, "laptop", "", 0); err != nil || !ours.Login.GetSuccess() {
			t.Fatalf("login: %v %v", err, ours.Login)
		}
		only := []*pb.Question{{Options: []*pb.Option{{Label: "left"}, {Label: "right"}}}}
		got := make(chan *hub.Reply, 1)
		go func() {
			rep, _ := f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Which way?", Timeout: time.Hour, Questions: only})
			got <- rep
		}()
		expect(t, older, wire.CmdAskQuestion)
		expect(t, ours, wire.CmdAskQuestion)
		typed := func(s string) *pb.WebsocketMessage {
			return &pb.WebsocketMessage{Cmd: wire.CmdAskQuestionReply, AskQuestionRequest: &pb.AskQuestionRequest{ID: "q"},
				AskQuestionResponse: &pb.AskQuestionResponse{ID: "q", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: s}}}}}
		}
		send(t, ours, typed("up"))
		if e := expect(t, ours, wire.CmdError).GetError(); e.GetCode() != "invalid_request" || e.GetRequestId() != "q" {
			t.Fatalf("a typed answer where the options show: %v", e)
		}
		send(t, older, typed("maybe"))
		synctest.Wait()
		select {
		case rep := <-got:
			if rep == nil || len(rep.Contents) != 1 || rep.Contents[0].GetText().GetText() != "maybe" {
				t.Fatalf("the agent got %v", rep)
			}
		default:
			t.Fatal("the older web UI's typed answer was refused: its card says answered, the agent still waits")
		}
	})
}
