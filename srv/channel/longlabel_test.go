package channel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Two long labels alike in their first words read the same once a phone
// cuts them on their buttons: a Telegram or ntfy question then lists its
// options whole above the buttons, as a Slack one does.
func longAlike() (keep, drop string) {
	stem := "Run the migration on production tonight, then"
	return stem + " keep the old table", stem + " drop the old table"
}

func TestTelegramLongLabelsAreShownWhole(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	f := newFixture(t, map[string][]Channel{tokA: {&Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}}}, Options{})
	keep, drop := longAlike()
	for i, multi := range []bool{false, true} {
		f.askText(tokA, "q-"+string(rune('1'+i)), "Which?", []*pb.Question{{Options: []*pb.Option{{Label: keep}, {Label: drop}}, Multiple: multi}})
		if text := api.Call(t, "sendMessage", i+1)["text"]; !strings.Contains(text, keep) || !strings.Contains(text, drop) {
			t.Errorf("multi %v: the message reads %q, without both options whole", multi, text)
		}
	}
	// Short ones are read on their buttons: not listed again.
	f.askText(tokA, "q-3", "Which?", []*pb.Question{{Options: []*pb.Option{{Label: "Keep it"}, {Label: "Drop it"}}}})
	if text := api.Call(t, "sendMessage", 3)["text"]; strings.Contains(text, "Keep it") {
		t.Errorf("the message reads %q: short labels listed too", text)
	}
}

func TestNtfyLongLabelsAreShownWhole(t *testing.T) {
	ntfy := newReceiver(t)
	c := &Ntfy{URL: ntfy.URL, Topic: "aa-secret-topic"}
	keep, drop := longAlike()
	for i, labels := range [][2]string{{keep, drop}, {"Keep it", "Drop it"}} {
		n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: hub.Request{Kind: wire.AskQuestion, ID: "q-" + labels[0], Text: "Which?",
			Questions: []*pb.Question{{Options: []*pb.Option{{Label: labels[0]}, {Label: labels[1]}}}}}}, AnswerURL: "https://aa.example/push/answer", Cap: "cap"}
		if err := c.Send(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		_, bodies := ntfy.waitFor(t, i+1)
		var m ntfyMessage
		if err := json.Unmarshal(bodies[i], &m); err != nil {
			t.Fatal(err)
		}
		listed := strings.Contains(m.Message, "- "+labels[0]) && strings.Contains(m.Message, "- "+labels[1])
		if len(m.Actions) != 2 || listed != (i == 0) {
			t.Errorf("labels %q: actions %d, message %q (listed: %v)", labels, len(m.Actions), m.Message, listed)
		}
	}
}
