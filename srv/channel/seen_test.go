package channel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// What a person sees of a question on each channel: tests that read the
// exact text a channel sends.

// askText asks token's room the question text, offering qs.
func (f *fixture) askText(token, id, text string, qs []*pb.Question) chan *hub.Reply {
	out := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(context.Background(), token, hub.Request{Kind: wire.AskQuestion, ID: id, Text: text,
			ProjectDirectory: "/srv/shop", AgentName: "Claude Code", Timeout: time.Hour, Questions: qs})
		out <- rep
	}()
	return out
}

// twoChats are a Telegram channel to chat 42 and a Slack channel to
// U42's DM, and the doubles of their APIs.
func twoChats(t *testing.T) (*telegramtest.API, *slacktest.API, *Telegram, *Slack) {
	const botToken = "123456:ABC-secret-bot-token"
	const slackBot, slackApp = "xoxb-9-secret-bot-token", "xapp-9-A1-secret-app-token"
	tgAPI := telegramtest.Start(t, botToken)
	slAPI := slacktest.Start(t, slackBot, slackApp)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: tgAPI.URL}
	sl := &Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: slAPI.APIURL()}
	return tgAPI, slAPI, tg, sl
}

// rollouts are options a person needs their descriptions to choose
// between; the last label is as long as a label may be.
var rollouts = []*pb.Question{{Options: []*pb.Option{
	{Label: "Blue-green", Description: "Start v2 beside v1, switch the traffic at once."},
	{Label: "Canary", Description: "Send 5% of the traffic to v2 for an hour."},
	{Label: "Rolling"},
	{Label: strings.Repeat("Recreate every pod of the deployment ", 3)[:wire.MaxLabelBytes], Description: "Downtime of a minute."},
}}}

// TestSettledMessageOffersNoAnswer: once a question is settled, its
// Telegram message and its Slack message say so, without their buttons
// and without still asking to tap or press one.
func TestSettledMessageOffersNoAnswer(t *testing.T) {
	tgAPI, slAPI, tg, sl := twoChats(t)
	f := newFixture(t, map[string][]Channel{tokA: {tg, sl}}, Options{})
	answered := f.ask(tokA, "q-1")
	tgAPI.Call(t, "sendMessage", 1)
	slAPI.Call(t, "chat.postMessage", 1)
	if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: []*pb.McpResultContent{textContent("Yes")}, ClientID: "pc", Nickname: "Pixel 8 · Chrome"}); err != nil {
		t.Fatal(err)
	}
	answer(t, answered)
	edit := tgAPI.Call(t, "editMessageText", 1)["text"]
	if strings.Contains(edit, "Tap an answer") || !strings.HasSuffix(edit, "— shop · Answered on Pixel 8 · Chrome: Yes") {
		t.Errorf("Telegram's settled message:\n%s", edit)
	}
	blocks, err := slacktest.BlocksOf(slAPI.Call(t, "chat.update", 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || strings.Contains(blocks[0].Text.Text, "Press an answer") || !strings.HasSuffix(blocks[0].Text.Text, "— shop · Answered on Pixel 8 · Chrome: Yes") {
		t.Errorf("Slack's settled message: %+v", blocks)
	}
}

// TestOptionsAreDescribed: a question's options reach the person with
// their descriptions: a mail (which has no buttons) lists every option,
// Telegram and Slack list them under the question, ntfy (three buttons
// at most) too.
func TestOptionsAreDescribed(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	const slackBot, slackApp = "xoxb-8-secret-bot-token", "xapp-8-A1-secret-app-token"
	tgAPI := telegramtest.Start(t, botToken)
	slAPI := slacktest.Start(t, slackBot, slackApp)
	ntfy := newReceiver(t)
	sink, box := newSMTPSink(t), newIMAPBox(t)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: tgAPI.URL}
	sl := &Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: slAPI.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {tg, sl, &Ntfy{URL: ntfy.URL, Topic: "t"}, newEmail(sink, box, io.Discard)}}, Options{})
	f.askText(tokA, "q-1", "How do we roll out v2?", rollouts)

	opts := rollouts[0].GetOptions()
	tgText := tgAPI.Call(t, "sendMessage", 1)["text"]
	blocks, err := slacktest.BlocksOf(slAPI.Call(t, "chat.postMessage", 1))
	if err != nil {
		t.Fatal(err)
	}
	_, bodies := ntfy.waitFor(t, 1)
	var nm ntfyMessage
	if err := json.Unmarshal(bodies[0], &nm); err != nil {
		t.Fatal(err)
	}
	_, _, mailBody := sink.wait(t, 1)
	for door, got := range map[string]string{"telegram": tgText, "slack": blocks[0].Text.Text, "ntfy": nm.Message, "email": mailBody} {
		for _, o := range opts {
			if !strings.Contains(got, o.GetLabel()) || !strings.Contains(got, o.GetDescription()) {
				t.Errorf("%s does not show the option %q (%q):\n%s", door, o.GetLabel(), o.GetDescription(), got)
			}
		}
	}
	if !strings.Contains(tgText, "• <b>Canary</b> — Send 5% of the traffic to v2 for an hour.") {
		t.Errorf("Telegram's options:\n%s", tgText)
	}
	if !strings.Contains(mailBody, "reply with one of them") {
		t.Errorf("the mail does not say how to choose:\n%s", mailBody)
	}
}

// TestImagesAreNamedNotSpelledOut: an image inside a question (a data:
// URL) is named where it cannot be shown, not written out in base64:
// in ntfy's message, Slack's text and the mail.
func TestImagesAreNamedNotSpelledOut(t *testing.T) {
	const slackBot, slackApp = "xoxb-7-secret-bot-token", "xapp-7-A1-secret-app-token"
	slAPI := slacktest.Start(t, slackBot, slackApp)
	ntfy := newReceiver(t)
	sink, box := newSMTPSink(t), newIMAPBox(t)
	sl := &Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: slAPI.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl, &Ntfy{URL: ntfy.URL, Topic: "t"}, newEmail(sink, box, io.Discard)}}, Options{})
	png := "data:image/png;base64," + strings.Repeat("iVBORw0KGgo", 300)
	f.askText(tokA, "q-1", "The latency plot:\n\n![p99 latency]("+png+")\n\nShip it anyway?", nil)

	blocks, err := slacktest.BlocksOf(slAPI.Call(t, "chat.postMessage", 1))
	if err != nil {
		t.Fatal(err)
	}
	_, bodies := ntfy.waitFor(t, 1)
	var nm ntfyMessage
	if err := json.Unmarshal(bodies[0], &nm); err != nil {
		t.Fatal(err)
	}
	_, _, mailBody := sink.wait(t, 1)
	for door, got := range map[string]string{"slack": blocks[0].Text.Text, "ntfy": nm.Message, "email": mailBody} {
		if strings.Contains(got, "base64") || !strings.Contains(got, "[image: p99 latency]") || !strings.Contains(got, "Ship it anyway?") {
			t.Errorf("%s shows the image as:\n%.600s", door, got)
		}
	}
}

// TestLongQuestionCutWhereItBreaks: a question longer than a channel's
// message is cut at the end of a line or word, never inside one, and the
// message says the rest is in the app; Telegram, Slack and ntfy alike.
func TestLongQuestionCutWhereItBreaks(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	const slackBot, slackApp = "xoxb-6-secret-bot-token", "xapp-6-A1-secret-app-token"
	tgAPI := telegramtest.Start(t, botToken)
	slAPI := slacktest.Start(t, slackBot, slackApp)
	ntfy := newReceiver(t)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: tgAPI.URL}
	sl := &Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: slAPI.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {tg, sl, &Ntfy{URL: ntfy.URL, Topic: "t"}}}, Options{})
	long := "## Plan\n\n" + strings.Repeat("The copy mirrors every write through a trigger.\n", 200)
	f.askText(tokA, "q-1", long, nil)

	tgText := tgAPI.Call(t, "sendMessage", 1)["text"]
	blocks, err := slacktest.BlocksOf(slAPI.Call(t, "chat.postMessage", 1))
	if err != nil {
		t.Fatal(err)
	}
	_, bodies := ntfy.waitFor(t, 1)
	var nm ntfyMessage
	if err := json.Unmarshal(bodies[0], &nm); err != nil {
		t.Fatal(err)
	}
	for door, got := range map[string]string{"telegram": tgText, "slack": blocks[0].Text.Text, "ntfy": nm.Message} {
		if !strings.Contains(got, "trigger.\n…") || !strings.Contains(got, "The rest is in the app.") {
			t.Errorf("%s cuts the question so:\n%s", door, got[max(0, len(got)-300):])
		}
	}
}

// TestTelegramSendsALargeImage: an image larger than the part of the
// text a message holds still goes as a photo, its base64 never in the
// message.
func TestTelegramSendsALargeImage(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	pic := append(testPNG(t), make([]byte, 8<<10)...)
	f.askText(tokA, "q-1", "The plot:\n\n![p99 latency](data:image/png;base64,"+base64.StdEncoding.EncodeToString(pic)+")\n\nRoll back?", nil)
	sent := api.Call(t, "sendMessage", 1)
	if strings.Contains(sent["text"], "base64") || !strings.Contains(sent["text"], "[p99 latency]\n\nRoll back?") {
		t.Errorf("the question's text: %.300q", sent["text"])
	}
	if ph := api.Call(t, "sendPhoto", 1); ph["photo"] != "image-1.png:"+strconv.Itoa(len(pic)) || ph["caption"] != "p99 latency" {
		t.Errorf("the photo: %v", ph)
	}
}

// TestSlackShowsMarkdownFormatted: a question's markdown reaches Slack as
// mrkdwn (bold, code, links), not as its marks; whatever the agent wrote
// that Slack would read as a mention or a link of its own is escaped,
// and the text is verbatim.
func TestSlackShowsMarkdownFormatted(t *testing.T) {
	const slackBot, slackApp = "xoxb-5-secret-bot-token", "xapp-5-A1-secret-app-token"
	slAPI := slacktest.Start(t, slackBot, slackApp)
	sl := &Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: slAPI.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	f.askText(tokA, "q-1", "## Plan\n\nShip **v2** to [staging](https://example.org/a?b=1&c=2) with `make up`? <!channel> <@U99>", nil)
	post := slAPI.Call(t, "chat.postMessage", 1)
	var blocks []struct {
		Text struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Verbatim bool   `json:"verbatim"`
		} `json:"text"`
	}
	if err := json.Unmarshal([]byte(post["blocks"]), &blocks); err != nil {
		t.Fatal(err)
	}
	want := "shop · Claude Code asks\n\n*Plan*\n\nShip *v2* to <https://example.org/a?b=1&amp;c=2|staging> with `make up`? &lt;!channel&gt; &lt;@U99&gt;"
	if got := blocks[0].Text; got.Type != "mrkdwn" || !got.Verbatim || !strings.HasPrefix(got.Text, want) {
		t.Errorf("section %+v\nwant it to start %q", got, want)
	}
}

// TestSlackMrkdwn: markdown as Slack's mrkdwn, everything the agent
// wrote escaped.
func TestSlackMrkdwn(t *testing.T) {
	for _, c := range []struct{ md, want string }{
		{"**Deploy** the `shop` _now_? ~~no~~", "*Deploy* the `shop` _now_? ~no~"},
		{"- one\n- two\n\n1. first", "• one\n• two\n\n1. first"},
		{"```sql\nSELECT 1 < 2;\n```", "```\nSELECT 1 &lt; 2;\n```"},
		{"> quoted\n> twice", "> quoted\n> twice"},
		{"[a|b](https://x.example/p|q) [bad](javascript:alert(1)) <https://y.example>", "<https://x.example/p%7Cq|a¦b> bad <https://y.example|https://y.example>"},
		{"![plot](https://x.example/p.png) ![raw](data:image/png;base64,AAAA)", "<https://x.example/p.png|[image: plot]> [image: raw]"},
	} {
		if got := slackMrkdwn(c.md); got != c.want {
			t.Errorf("slackMrkdwn(%q)\n got %q\nwant %q", c.md, got, c.want)
		}
	}
}

// TestNtfySettledSaysWhichQuestion: ntfy replaces a question's
// notification with the one saying it is settled; that one still says
// which question it was, in words.
func TestNtfySettledSaysWhichQuestion(t *testing.T) {
	ntfy := newReceiver(t)
	f := newFixture(t, map[string][]Channel{tokA: {&Ntfy{URL: ntfy.URL, Topic: "t"}}}, Options{})
	f.askText(tokA, "q-1", "## Deploy\n\nShip **v2** to [staging](https://example.org/x) now?", nil)
	ntfy.waitFor(t, 1)
	if err := f.hub.Cancel(context.Background(), tokA, "q-1"); err != nil {
		t.Fatal(err)
	}
	_, bodies := ntfy.waitFor(t, 2)
	var m ntfyMessage
	if err := json.Unmarshal(bodies[1], &m); err != nil {
		t.Fatal(err)
	}
	if m.Title != "shop · Withdrawn" || m.Message != "Deploy Ship v2 to staging now?\n\nNo answer is needed any more." || m.Markdown {
		t.Errorf("settled: %q / %q (markdown %v)", m.Title, m.Message, m.Markdown)
	}
}
