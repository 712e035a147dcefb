package channel

import (
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// TestSlackTicksSeveral: a question taking several options has a
// checkboxes element with its options and a Send button. Ticking a box
// answers nothing (and says nothing); Send answers with the boxes
// ticked in the message's state, one text each in the order offered,
// as the inbox answers; Send with none ticked is refused with a note
// only the presser sees. A reply in the thread naming options answers
// with those.
func TestSlackTicksSeveral(t *testing.T) {
	const botToken, appToken = "xoxb-3-secret-bot-token", "xapp-3-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	answered := f.askSeveral(tokA, "q-1")
	sent := api.Call(t, "chat.postMessage", 1)
	blocks, err := slacktest.BlocksOf(sent)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(slacktest.Boxes(blocks), "|"); got != "Web|Mobile|Desktop" {
		t.Fatalf("boxes %q, want the options", got)
	}
	if got := strings.Join(slacktest.Buttons(blocks), "|"); got != "Send" {
		t.Fatalf("buttons %q, want Send alone", got)
	}
	if !strings.Contains(blocks[0].Text.Text, "Tick") {
		t.Errorf("the message does not say how to answer: %q", blocks[0].Text.Text)
	}
	var boxes []string
	var send string
	for _, e := range blocks[1].Elements {
		for _, o := range e.Options {
			boxes = append(boxes, o.Value)
		}
		if e.Type == "button" {
			send = e.Value
		}
	}
	ts := sent["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{"D42", ts}); return ok })

	api.Envelope(t, "interactive", slacktest.Tick("U42", "D42", ts, "answers", "ticks", boxes[2]))
	api.Envelope(t, "interactive", slacktest.PressIn("U42", "D42", ts, send, slacktest.Ticked("answers", "ticks")))
	if got := api.Call(t, "chat.postEphemeral", 1); !strings.Contains(got["text"], "Tick") {
		t.Errorf("Send with none ticked: %v (a tick must say nothing)", got)
	}
	api.Envelope(t, "interactive", slacktest.PressIn("U42", "D42", ts, send, slacktest.Ticked("answers", "ticks", boxes[2], boxes[0])))
	if rep := answer(t, answered); texts(rep) != "Web|Desktop" || rep.Door != "slack" {
		t.Fatalf("the agent got %q, want the ticked options, one text each in the order offered", texts(rep))
	}

	second := f.askSeveral(tokA, "q-2")
	ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{"D42", ts2}); return ok })
	api.Envelope(t, "events_api", slacktest.ThreadReply("U42", "D42", ts2, "desktop\nmobile"))
	if rep := answer(t, second); texts(rep) != "Mobile|Desktop" {
		t.Fatalf("a reply naming two options: the agent got %q", texts(rep))
	}
}
