package channel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestSettledMessageNamesTheChoice: once a question is answered with
// what its buttons offered (an option, several, a quick reply), its
// Telegram and Slack messages, its ntfy notification and its mail's
// follow-up say which, so that a person who tapped one, or answered in
// the app, reads afterwards what was chosen; an answer in the person's
// own words is never repeated there (an ntfy topic or a chat may be
// read by others).
func TestSettledMessageNamesTheChoice(t *testing.T) {
	tgAPI, slAPI, tg, sl := twoChats(t)
	ntfy := newReceiver(t)
	sink, box := newSMTPSink(t), newIMAPBox(t)
	e := newEmail(sink, box, &syncBuffer{wake: make(chan struct{}, 1)})
	f := newFixture(t, map[string][]Channel{tokA: {tg, sl, &Ntfy{URL: ntfy.URL, Topic: "t"}, e}}, Options{})
	checks := []*pb.Question{{Multiple: true, Options: []*pb.Option{{Label: "Unit tests"}, {Label: "Lint"}, {Label: "E2E"}}}}
	open := []*pb.Question{{Custom: true, Options: rollouts[0].Options}}
	for i, tc := range []struct {
		name    string
		qs      []*pb.Question
		answer  []string
		settled string // the outcome as told, "" when no choice is named
	}{
		{"an option", rollouts, []string{"Canary"}, "shop · Answered on Pixel 8 · Chrome: Canary"},
		{"options", checks, []string{"Unit tests", "E2E"}, "shop · Answered on Pixel 8 · Chrome: Unit tests, E2E"},
		{"a quick reply", nil, []string{"Go ahead"}, "shop · Answered on Pixel 8 · Chrome: Go ahead"},
		{"own words", nil, []string{"The password is hunter2"}, "shop · Answered on Pixel 8 · Chrome"},
		{"an option and words", open, []string{"Canary", "and hunter2"}, "shop · Answered on Pixel 8 · Chrome"},
	} {
		id := "q-" + tc.name
		asked := f.askText(tokA, id, "Which one?", tc.qs)
		tgAPI.Call(t, "sendMessage", i+1)
		slAPI.Call(t, "chat.postMessage", i+1)
		ntfy.waitFor(t, 2*i+1)
		sink.wait(t, 2*i+1)
		var contents []*pb.McpResultContent
		for _, a := range tc.answer {
			contents = append(contents, textContent(a))
		}
		if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, id, hub.Reply{Contents: contents, ClientID: "pc", Nickname: "Pixel 8 · Chrome"}); err != nil {
			t.Fatal(err)
		}
		answer(t, asked)
		edit := tgAPI.Call(t, "editMessageText", i+1)["text"]
		update := slAPI.Call(t, "chat.update", i+1)["text"]
		_, bodies := ntfy.waitFor(t, 2*i+2)
		var note ntfyMessage
		if err := json.Unmarshal(bodies[2*i+1], &note); err != nil {
			t.Fatal(err)
		}
		_, _, mailed := sink.wait(t, 2*i+2)
		for where, got := range map[string]string{"Telegram": edit, "Slack": update, "ntfy": note.Title, "e-mail": mailed} {
			if !strings.Contains(got, tc.settled) || (tc.settled != "" && strings.Contains(got, tc.settled+":")) {
				t.Errorf("%s: %s tells %q, want %q", tc.name, where, got, tc.settled)
			}
			if strings.Contains(got, "hunter2") {
				t.Errorf("%s: %s repeats the person's words: %q", tc.name, where, got)
			}
		}
	}
}
