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

// TestNtfyListsOptionsWithoutButtons: a server with no public address
// gives ntfy's notification no buttons (a phone could reach none): a
// question's own options are then listed in it, or the person reads a
// question whose answers the notification never shows.
func TestNtfyListsOptionsWithoutButtons(t *testing.T) {
	ntfy := newReceiver(t)
	c := &Ntfy{URL: ntfy.URL, Topic: "aa-secret-topic"}
	n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Which layout?",
		Questions: []*pb.Question{{Options: []*pb.Option{{Label: "Sidebar"}, {Label: "Tabs"}}}}}}}
	if err := c.Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	_, bodies := ntfy.waitFor(t, 1)
	var m ntfyMessage
	if err := json.Unmarshal(bodies[0], &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Actions) != 0 || !strings.Contains(m.Message, "- Sidebar") || !strings.Contains(m.Message, "- Tabs") {
		t.Errorf("actions %+v, message %q: want the options listed", m.Actions, m.Message)
	}
	// One offering none has nothing to list.
	n.Request.ID, n.Request.Questions = "q-2", nil
	if err := c.Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	_, bodies = ntfy.waitFor(t, 2)
	if err := json.Unmarshal(bodies[1], &m); err != nil || m.Message != "Which layout?" {
		t.Errorf("message %q (%v), want the question alone", m.Message, err)
	}
}
