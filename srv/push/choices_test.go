package push

import (
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
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
	if m := askMessage(ev, "room", sub, "cap"); strings.Join(m.Actions, "|") != "Continue|Stop|Run the tests again" {
		t.Errorf("actions with options = %q", m.Actions)
	}
	ev.Request.Questions = nil
	if m := askMessage(ev, "room", sub, "cap"); strings.Join(m.Actions, "|") != "Yes|No" {
		t.Errorf("actions without options = %q", m.Actions)
	}
}

// TestPushNamesWhoAsks: the MCP client's name stands in for a missing
// agent name, as in the inbox.
func TestPushNamesWhoAsks(t *testing.T) {
	ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Deploy?", McpClientName: "inspector-cli"}}
	if m := askMessage(ev, "room", Subscription{}, "cap"); m.Title != "inspector-cli asks" {
		t.Errorf("title %q", m.Title)
	}
}
