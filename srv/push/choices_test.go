package push

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestActionsAreTheOptions: a question with options shows them as the
// notification's actions (never cut: a label too long for a button is
// left to the app), in place of the person's quick replies; one without
// keeps the quick replies.
func TestActionsAreTheOptions(t *testing.T) {
	sub := Subscription{Replies: []string{"Yes", "No"}}
	ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.TaskFinish, ID: "r", Text: "done",
		Questions: []*pb.Question{{Options: []*pb.Option{
			{Label: "Continue"}, {Label: strings.Repeat("x", maxAction+1)}, {Label: "Stop"}, {Label: "Run the tests again"}, {Label: "Fifth"},
		}}}}}
	if m := askMessage(ev, "room", sub); strings.Join(m.Actions, "|") != "Continue|Stop|Run the tests again" {
		t.Errorf("actions with options = %q", m.Actions)
	}
	ev.Request.Questions = nil
	if m := askMessage(ev, "room", sub); strings.Join(m.Actions, "|") != "Yes|No" {
		t.Errorf("actions without options = %q", m.Actions)
	}
}

// TestPushCountsTheOptions: a question of one choice tells the device
// how many options it offers, so that a notification with fewer
// buttons (three at most, fewer where a label is too long or the
// browser shows fewer) says the rest are in the app; a question without
// options, or of several choices (opened in the app), tells none.
func TestPushCountsTheOptions(t *testing.T) {
	var opts []*pb.Option
	for _, l := range []string{"Production", strings.Repeat("x", maxAction+1), "Staging", "Canary", "Skip"} {
		opts = append(opts, &pb.Option{Label: l})
	}
	ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Where?", Questions: []*pb.Question{{Options: opts}}}}
	if m := askMessage(ev, "room", Subscription{}); m.Options != 5 || len(m.Actions) != 3 {
		t.Errorf("options %d, actions %q", m.Options, m.Actions)
	}
	ev.Request.Questions[0].Multiple = true
	if m := askMessage(ev, "room", Subscription{}); m.Options != 0 {
		t.Errorf("several choices: options %d", m.Options)
	}
	ev.Request.Questions = nil
	if m := askMessage(ev, "room", Subscription{Replies: []string{"Yes"}}); m.Options != 0 {
		t.Errorf("no options: options %d", m.Options)
	}
}

// TestPushKeepsTheQuestionsLastParagraph: a question too long for a
// notification keeps its last paragraph, the question itself, after the
// cut, as the channels' messages do: the notification's buttons never
// answer a question it does not show.
func TestPushKeepsTheQuestionsLastParagraph(t *testing.T) {
	text := strings.Repeat("The migration touches the **orders** table. ", 40) + "\n\nShall I run it *now*?"
	ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, ID: "q", Text: text}}
	m := askMessage(ev, "room", Subscription{Replies: []string{"Yes", "No"}})
	if len(m.Body) > maxBody || !strings.HasSuffix(m.Body, "Shall I run it now?") || !strings.Contains(m.Body, "The rest is in the app") {
		t.Errorf("body of %d bytes: %q", len(m.Body), m.Body)
	}
	// Cut at its end, it says so.
	ev.Request.Text = strings.Repeat("word ", 300)
	if m := askMessage(ev, "room", Subscription{}); len(m.Body) > maxBody || !strings.HasSuffix(m.Body, "…") {
		t.Errorf("body of %d bytes: %q", len(m.Body), m.Body)
	}
}

// TestPushNamesWhoAsks: the MCP client's name stands in for a missing
// agent name, as in the inbox.
func TestPushNamesWhoAsks(t *testing.T) {
	ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Deploy?", McpClientName: "inspector-cli"}}
	if m := askMessage(ev, "room", Subscription{}); m.Title != "inspector-cli asks" || m.Asker != "inspector-cli" {
		t.Errorf("title %q, asker %q", m.Title, m.Asker)
	}
}

// TestPushCarriesTheTitlesParts: a device words the title in the
// language chosen in its app from who asks and the project; the agent
// that gave no name is told as none, for the device's own words.
func TestPushCarriesTheTitlesParts(t *testing.T) {
	ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Deploy?", AgentName: "Claude", ProjectDirectory: "/src/shop"}}
	if m := askMessage(ev, "room", Subscription{}); m.Title != "shop · Claude asks" || m.Asker != "Claude" || m.Project != "shop" {
		t.Errorf("title %q, asker %q, project %q", m.Title, m.Asker, m.Project)
	}
	ev.Request.AgentName, ev.Request.ProjectDirectory = "", ""
	if m := askMessage(ev, "room", Subscription{}); m.Title != "Your agent asks" || m.Asker != "" || m.Project != "" {
		t.Errorf("title %q, asker %q, project %q", m.Title, m.Asker, m.Project)
	}
}

// TestSeveralOptionsAreChosenInTheApp: a question that takes several of
// its options shows none of them as a button (a tap would answer with
// that one alone): its notification opens the app on its card
// (choose), and offers the person's quick replies only where words of
// one's own are taken, none that reads as an option. Its capability
// answers with those replies only, never with an option; with no reply
// to offer there is no capability at all.
func TestSeveralOptionsAreChosenInTheApp(t *testing.T) {
	f := newFixture(t, Options{})
	phone := newDevice(t, "/phone")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome", "web", "Not now", "Later", "Stop")
	ask := func(id string, custom bool) chan *hub.Reply {
		out := make(chan *hub.Reply, 1)
		go func() {
			rep, _ := f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Which to deploy?", Timeout: time.Hour,
				Questions: []*pb.Question{{Multiple: true, Custom: custom, Options: []*pb.Option{{Label: "Web"}, {Label: "API"}, {Label: "Worker"}}}}})
			out <- rep
		}()
		return out
	}
	answered := ask("q-1", true)
	m := phone.open(t, f.s, f.s.waitFor(t, "/phone", 1)[0]).msg
	if !m.Choose || strings.Join(m.Actions, "|") != "Not now|Later" || m.Cap == "" {
		t.Fatalf("several options, words taken: choose %v, actions %q, cap %q; want choose, Not now|Later", m.Choose, m.Actions, m.Cap)
	}
	for _, text := range []string{"Web", "API", "Web, API", "web"} {
		if _, err := f.caps.Use(context.Background(), f.hub, m.Cap, text, time.Now()); !errors.Is(err, answercap.ErrNotOffered) {
			t.Errorf("the capability answered %q: %v, want ErrNotOffered", text, err)
		}
	}
	if _, err := f.caps.Use(context.Background(), f.hub, m.Cap, "Later", time.Now()); err != nil {
		t.Fatalf("the offered reply: %v", err)
	}
	if rep := <-answered; rep == nil || rep.Contents[0].GetText().GetText() != "Later" {
		t.Fatalf("the agent got %+v", rep)
	}

	ask("q-2", false)
	m = phone.open(t, f.s, f.s.waitFor(t, "/phone", 2)[1]).msg
	if m.ID != "q-2" || !m.Choose || len(m.Actions) != 0 || m.Cap != "" || m.Answer != "" {
		t.Errorf("several options only: %+v, want choose with no answer and no capability", m)
	}
}
