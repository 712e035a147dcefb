package push

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestSettledPushNamesTheChoice: the push that closes a question's
// notification on the other devices says what was chosen among what the
// notification offered (an option, several, a quick reply of the
// device's), as the channels' messages do, opened as the device opens
// it (npm's http_ece); an answer in the person's own words is never
// repeated in it: a lock screen is read by whoever holds the phone.
func TestSettledPushNamesTheChoice(t *testing.T) {
	f := newFixture(t, Options{})
	laptop := newDevice(t, "/laptop")
	laptop.subscribe(t, f.p, f.s, tokA, "Laptop · Firefox", "Ship it", "Wait")
	canary := []*pb.Question{{Options: []*pb.Option{{Label: "Blue-green"}, {Label: "Canary"}}}}
	checks := []*pb.Question{{Multiple: true, Options: []*pb.Option{{Label: "Unit tests"}, {Label: "Lint"}, {Label: "E2E"}}}}
	open := []*pb.Question{{Custom: true, Options: canary[0].Options}}
	for i, tc := range []struct {
		name    string
		qs      []*pb.Question
		answer  []string
		outcome string
	}{
		{"an option", canary, []string{"Canary"}, "Answered on Pixel 8 · Chrome: Canary"},
		{"options", checks, []string{"Unit tests", "E2E"}, "Answered on Pixel 8 · Chrome: Unit tests, E2E"},
		{"a quick reply", nil, []string{"Ship it"}, "Answered on Pixel 8 · Chrome: Ship it"},
		{"own words", nil, []string{"The password is hunter2"}, "Answered on Pixel 8 · Chrome"},
		{"an option and words", open, []string{"Canary", "and hunter2"}, "Answered on Pixel 8 · Chrome"},
	} {
		id := "q-" + tc.name
		go func() {
			_, _ = f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Which one?",
				Questions: tc.qs, AgentName: "Claude Code", Timeout: time.Hour})
		}()
		f.s.waitFor(t, "/laptop", 2*i+1)
		var contents []*pb.McpResultContent
		for _, a := range tc.answer {
			contents = append(contents, &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: a}})
		}
		if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, id, hub.Reply{Contents: contents, ClientID: "pc", Nickname: "Pixel 8 · Chrome"}); err != nil {
			t.Fatal(err)
		}
		got := laptop.open(t, f.s, f.s.waitFor(t, "/laptop", 2*i+2)[2*i+1])
		if got.msg.Type != "settled" || got.msg.Outcome != tc.outcome {
			t.Errorf("%s: settled push = %+v, want the outcome %q", tc.name, got.msg, tc.outcome)
		}
		if strings.Contains(got.raw, "hunter2") {
			t.Errorf("%s: the settled push repeats the person's words: %s", tc.name, got.raw)
		}
	}
}

// TestSettledDuringItsPushNamesTheChoice: a question answered while its
// push is on its way (on another instance of a cluster, or here a moment
// before the Pusher hears it) is closed by a push that names the choice
// too, as the one that follows its settled event does.
func TestSettledDuringItsPushNamesTheChoice(t *testing.T) {
	f := newFixture(t, Options{})
	phone := newDevice(t, "/phone")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome")
	canary := []*pb.Question{{Options: []*pb.Option{{Label: "Blue-green"}, {Label: "Canary"}}}}
	f.s.status = func(path string, n int) int {
		if n == 1 {
			f.p.unsub() // answered elsewhere: its event is not heard here
			contents := []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Canary"}}}
			if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: contents, ClientID: "pc", Nickname: "PC"}); err != nil {
				t.Error(err)
			}
		}
		return 201
	}
	go func() {
		_, _ = f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Which one?",
			Questions: canary, AgentName: "Claude Code", Timeout: time.Hour})
	}()
	got := f.s.waitFor(t, "/phone", 2)
	if m := phone.open(t, f.s, got[1]).msg; m.Type != "settled" || m.Outcome != "Answered on PC: Canary" {
		t.Fatalf("the close pushed after the question's push: %s, outcome %q; want it to name the choice", m.Type, m.Outcome)
	}
}
