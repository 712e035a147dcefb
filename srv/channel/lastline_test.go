package channel

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestCutQuestionKeepsItsLastParagraph: an agent often gives its
// reasons first and asks last. A question too long for a channel's
// message keeps that last paragraph after the cut, with the mark saying
// the rest is in the app, on Telegram, Slack and ntfy: their Yes and No
// buttons never answer a question the message does not show.
func TestCutQuestionKeepsItsLastParagraph(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	const slackBot, slackApp = "xoxb-8-secret-bot-token", "xapp-8-A1-secret-app-token"
	const ask = "Shall I run the migration **now**?"
	text := strings.Repeat("The migration touches the orders, the invoices and the customers tables. ", 100) + "\n\n" + ask + "\n"
	tgAPI := telegramtest.Start(t, botToken)
	slAPI := slacktest.Start(t, slackBot, slackApp)
	ntfy := newReceiver(t)
	f := newFixture(t, map[string][]Channel{tokA: {
		&Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: tgAPI.URL},
		&Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: slAPI.APIURL()},
		&Ntfy{URL: ntfy.URL, Topic: "t"},
	}}, Options{})
	f.askText(tokA, "q-1", text, nil)
	_, bodies := ntfy.waitFor(t, 1)
	var m ntfyMessage
	if err := json.Unmarshal(bodies[0], &m); err != nil {
		t.Fatal(err)
	}
	blocks, err := slacktest.BlocksOf(slAPI.Call(t, "chat.postMessage", 1))
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{
		"Telegram": tgAPI.Call(t, "sendMessage", 1)["text"],
		"Slack":    blocks[0].Text.Text,
		"ntfy":     m.Message,
	} {
		mark := strings.Index(got, restInApp)
		last := strings.Index(got, "run the migration")
		if mark < 0 || last < mark || strings.Count(got, "…") != 1 {
			t.Errorf("%s's message does not end with the question after the cut:\n%s", name, got[max(0, len(got)-300):])
		}
	}
}

// TestCutKeepsNoLastParagraphInsideCode: a last paragraph that is code
// (fenced, or indented: kept, its first line would lose its indent and
// the block read as a paragraph), or one after a cut inside a code
// block, is not kept: it would read as
// code, or break the code's formatting; the text is cut at its end.
func TestCutKeepsNoLastParagraphInsideCode(t *testing.T) {
	long := strings.Repeat("word ", 400)
	for name, s := range map[string]string{
		"last is code":    long + "\n\n```\nrm -rf build\n```",
		"last indented":   long + "\n\n    rm -rf build\n    make",
		"last tabbed":     long + "\n\n\trm -rf build\n\tmake",
		"cut inside code": "```\n" + long + "\n\nstill code\n```\n\nRun it?",
		"last too long":   long + "\n\n" + strings.Repeat("more ", 200),
	} {
		got, cut := clipText(s, 1000)
		if !cut || strings.Contains(got, restInApp) || len(got) > 1000 {
			t.Errorf("%s: cut %v, %q", name, cut, got[max(0, len(got)-100):])
		}
	}
	// Short enough: as it is.
	if got, cut := clipText("Why?\n\nRun it?", 100); got != "Why?\n\nRun it?" || cut {
		t.Errorf("a short text: %q, %v", got, cut)
	}
}
