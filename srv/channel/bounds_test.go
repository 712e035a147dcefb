package channel

import (
	"context"
	"encoding/json"
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

// Questions as long as an agent may make them, in every part: each still
// fits the message a chat takes (Telegram's 4,096 characters, Slack's
// 3,000 in a section), asked and once settled, or the person never sees
// it at all.

// fullOptions are as many options as a question may offer, with labels
// and descriptions as long as they may be, full of what escaping
// lengthens.
func fullOptions() []*pb.Question {
	var opts []*pb.Option
	for i := range wire.MaxOptions {
		l := strconv.Itoa(i) + strings.Repeat("<&", wire.MaxLabelBytes)
		opts = append(opts, &pb.Option{Label: l[:wire.MaxLabelBytes], Description: strings.Repeat("&<", wire.MaxDescriptionBytes/2)})
	}
	return []*pb.Question{{Options: opts}}
}

// longQuestions are question texts that reach a chat's bound in
// different ways.
var longQuestions = map[string]string{
	"words":        strings.Repeat("The copy mirrors every write. ", 1000),
	"escaped":      strings.Repeat("a<b && c>d ", 1000),
	"nested lists": nestedList(40),
	"emoji":        strings.Repeat("🇺🇦👨‍👩‍👧 ", 1000),
}

// nestedList is a list d deep, each item one line deeper than the last.
func nestedList(d int) string {
	var b strings.Builder
	for i := range d {
		b.WriteString(strings.Repeat("  ", i) + "- item " + strconv.Itoa(i) + " " + strings.Repeat("word ", 10) + "\n")
	}
	return strings.Repeat(b.String()+"\n", 3)
}

func TestLongestQuestionFitsItsMessage(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	const slackBot, slackApp = "xoxb-7-secret-bot-token", "xapp-7-A1-secret-app-token"
	for name, text := range longQuestions {
		for _, qs := range [][]*pb.Question{nil, fullOptions()} {
			t.Run(name+"/options="+strconv.Itoa(len(qs)), func(t *testing.T) {
				tgAPI := telegramtest.Start(t, botToken)
				slAPI := slacktest.Start(t, slackBot, slackApp)
				tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: tgAPI.URL}
				sl := &Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: slAPI.APIURL()}
				f := newFixture(t, map[string][]Channel{tokA: {tg, sl}}, Options{})
				answered := make(chan *hub.Reply, 1)
				go func() {
					rep, _ := f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: text,
						ProjectDirectory: "/srv/" + strings.Repeat("<&", 100), AgentName: strings.Repeat("&<", 200), Timeout: time.Hour, Questions: qs})
					answered <- rep
				}()
				if c := tgAPI.Call(t, "sendMessage", 1); c["_error"] != "" {
					t.Fatalf("Telegram refused the question: %s", c["_error"])
				}
				if c := slAPI.Call(t, "chat.postMessage", 1); c["_error"] != "" {
					t.Fatalf("Slack refused the question: %s", c["_error"])
				}
				answer := "Yes"
				if len(qs) > 0 {
					answer = qs[0].GetOptions()[0].GetLabel()
				}
				if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: []*pb.McpResultContent{textContent(answer)},
					ClientID: "pc", Nickname: strings.Repeat("<&>", 100)}); err != nil {
					t.Fatal(err)
				}
				within(t, "the agent's answer", answered)
				if c := tgAPI.Call(t, "editMessageText", 1); c["_error"] != "" {
					t.Errorf("Telegram refused the settled question: %s", c["_error"])
				}
				if c := slAPI.Call(t, "chat.update", 1); c["_error"] != "" {
					t.Errorf("Slack refused the settled question: %s", c["_error"])
				}
			})
		}
	}
}

// TestNtfyMessageWithinItsLimit: ntfy takes a message of 4,096 bytes at
// most (a longer one it turns into an attachment, or refuses): the
// longest question, with every option described, stays within it.
func TestNtfyMessageWithinItsLimit(t *testing.T) {
	for name, text := range longQuestions {
		t.Run(name, func(t *testing.T) {
			ntfy := newReceiver(t)
			f := newFixture(t, map[string][]Channel{tokA: {&Ntfy{URL: ntfy.URL, Topic: "t"}}}, Options{})
			f.askText(tokA, "q-1", text, fullOptions())
			_, bodies := ntfy.waitFor(t, 1)
			var m ntfyMessage
			if err := json.Unmarshal(bodies[0], &m); err != nil {
				t.Fatal(err)
			}
			if len(m.Message) > ntfyMaxMessage || !strings.Contains(m.Message, restInApp) {
				t.Errorf("ntfy's message is %d bytes, ending %q", len(m.Message), m.Message[max(0, len(m.Message)-200):])
			}
		})
	}
}
