package channel

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestSlack: a question goes to the configured DM as a Block Kit message
// with buttons, whose values are no capability; a stranger's press answers nothing (they are told so);
// a configured user's press answers with that button, and the message is
// updated to say the question is settled, without its buttons; a reply
// in a question's thread answers it with the reply's text, a stranger's
// does not. Every envelope is acknowledged.
func TestSlack(t *testing.T) {
	const botToken, appToken = "xoxb-1-secret-bot-token", "xapp-1-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	answered := f.ask(tokA, "q-1")
	sent := api.Call(t, "chat.postMessage", 1)
	blocks, err := slacktest.BlocksOf(sent)
	if err != nil || len(blocks) != 2 || sent["channel"] != "U42" {
		t.Fatalf("posted %v: %v", sent, err)
	}
	if blocks[0].Type != "section" || blocks[0].Text.Type != "mrkdwn" || !strings.HasPrefix(blocks[0].Text.Text, "shop · Claude Code asks\n\nDeploy *now*?") {
		t.Errorf("section %+v", blocks[0])
	}
	if blocks[1].Type != "actions" || len(blocks[1].Elements) != 3 || blocks[1].Elements[1].Type != "button" || blocks[1].Elements[1].Text.Text != "No" {
		t.Fatalf("actions %+v", blocks[1])
	}
	no, yes := blocks[1].Elements[1].Value, blocks[1].Elements[0].Value
	const dm = "D42"
	ts := sent["_ts"]

	// Anyone who can read the channel reads the buttons' values: they do
	// not answer at the server's public address.
	for part := range strings.SplitSeq(no, ":") {
		body, _ := json.Marshal(map[string]string{"cap": part, "text": "Yes"})
		resp, err := http.Post(f.public.URL+"/push/answer", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("a button's value %q answers at /push/answer", no)
		}
	}
	// A press can come only once the message is posted and its ts noted.
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	api.Envelope(t, "interactive", slacktest.Press("U99", dm, ts, no)) // a stranger
	if got := api.Call(t, "chat.postEphemeral", 1); got["user"] != "U99" || !strings.Contains(got["text"], "may not answer") {
		t.Errorf("the stranger was told %v", got)
	}
	api.Envelope(t, "interactive", slacktest.Press("U42", dm, ts, no))
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "No" || rep.Door != "slack" {
		t.Fatalf("the agent got %+v", rep)
	}
	upd := api.Call(t, "chat.update", 1)
	if blocks, err = slacktest.BlocksOf(upd); err != nil || upd["channel"] != dm || upd["ts"] != ts || len(blocks) != 1 ||
		!strings.HasSuffix(blocks[0].Text.Text, "— shop · Answered on Slack: No") {
		t.Errorf("update %v: %v", upd, err)
	}

	api.Envelope(t, "interactive", slacktest.Press("U42", dm, ts, yes))
	if got := api.Call(t, "chat.postEphemeral", 2); got["user"] != "U42" || !strings.Contains(got["text"], "no longer pending") {
		t.Errorf("a press after the answer: %v", got)
	}

	second := f.ask(tokA, "q-2")
	ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts2}); return ok })
	api.Envelope(t, "events_api", slacktest.ThreadReply("U99", dm, ts2, "Ship it.")) // a stranger
	api.Envelope(t, "events_api", slacktest.ThreadReply("U42", dm, ts2, "Wait for the review."))
	if rep := answer(t, second); rep == nil || rep.Contents[0].GetText().GetText() != "Wait for the review." || rep.Door != "slack" || rep.ClientID != "slack:U42" {
		t.Fatalf("the reply: %+v", rep)
	}
}

// TestSlackKeepsTokensSecret: when Slack's answers name the tokens, they
// appear neither in Send's error nor in the log of a refused connection.
func TestSlackKeepsTokensSecret(t *testing.T) {
	const botToken, appToken = "xoxb-2-secret-bot-token", "xapp-2-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	api.Refuse = true
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	log := slog.New(slog.NewTextHandler(logs, nil))
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "C1", Users: []string{"U42"}, APIURL: api.APIURL(), Logger: log}
	newFixture(t, map[string][]Channel{tokA: {sl}}, Options{Logger: log}) // it listens; its refusal is the Manager's to log
	err := sl.Send(t.Context(), Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "?"}}})
	if err == nil || !strings.Contains(err.Error(), "invalid_auth for ***") {
		t.Fatalf("Send: %v", err)
	}
	deadline := time.After(10 * time.Second)
	for !strings.Contains(logs.String(), "invalid_auth for ***") {
		select {
		case <-logs.wake:
		case <-deadline:
			t.Fatalf("no log of the refused connection: %s", logs.String())
		}
	}
	for _, tok := range []string{botToken, appToken} {
		if strings.Contains(err.Error()+logs.String(), tok) {
			t.Errorf("a token shows: %v\n%s", err, logs.String())
		}
	}
}
