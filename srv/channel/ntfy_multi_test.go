package channel

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestNtfyOpensSeveral: an ntfy notification's buttons answer with one
// tap each, so a question taking several options gets none of them as a
// button: with public_url, one "view" action opens the app on the
// question; without, no button, and the text says to choose in the app.
// Its options are listed either way.
func TestNtfyOpensSeveral(t *testing.T) {
	ntfy := newReceiver(t)
	f := newFixture(t, map[string][]Channel{tokA: {&Ntfy{URL: ntfy.URL, Topic: "aa-secret-topic"}}}, Options{})
	f.askSeveral(tokA, "q 1")
	_, bodies := ntfy.waitFor(t, 1)
	var m ntfyMessage
	if err := json.Unmarshal(bodies[0], &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Actions) != 1 || m.Actions[0].Action != "view" || m.Actions[0].URL != f.public.URL+"/?request=q+1" || m.Actions[0].Body != "" {
		t.Fatalf("actions %+v, want one view action opening the question", m.Actions)
	}
	if !strings.Contains(m.Message, "\n- Web\n- Mobile\n- Desktop") || !strings.Contains(m.Message, "in the app") {
		t.Errorf("message %q: want the options listed and where to choose", m.Message)
	}

	// Without public_url: no link to make, and no button.
	var alone ntfyMessage
	recv := newReceiver(t)
	n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, At: time.Now(), Request: hub.Request{Kind: wire.AskQuestion, ID: "q-2",
		Text: "Which platforms?", Questions: several}}, Cap: "cap"}
	if err := (&Ntfy{URL: recv.URL, Topic: "t"}).Send(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	_, bodies = recv.waitFor(t, 1)
	if err := json.Unmarshal(bodies[0], &alone); err != nil {
		t.Fatal(err)
	}
	if len(alone.Actions) != 0 || !strings.Contains(alone.Message, "Choose one or more in the app") {
		t.Errorf("without public_url: actions %+v, message %q", alone.Actions, alone.Message)
	}
}

// TestNtfySequenceIDTellsNothingOfTheToken: whoever reads an ntfy topic
// reads a question's sequence ID beside its ID (the link that opens the
// question taking several options names it). Made of the token's room
// and the ID alone, it let a reader check guesses of a short configured
// token offline; it is keyed with the server's secret instead: servers
// of other keys name the same question of the same token differently.
func TestNtfySequenceIDTellsNothingOfTheToken(t *testing.T) {
	var seen []ntfyMessage
	for range 2 {
		ntfy := newReceiver(t)
		f := newFixture(t, map[string][]Channel{tokA: {&Ntfy{URL: ntfy.URL, Topic: "aa-secret-topic"}}}, Options{})
		f.askSeveral(tokA, "q 1")
		_, bodies := ntfy.waitFor(t, 1)
		var m ntfyMessage
		if err := json.Unmarshal(bodies[0], &m); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Click, "request=q+1") || m.SequenceID == "" {
			t.Fatalf("click %q, sequence ID %q", m.Click, m.SequenceID)
		}
		seen = append(seen, m)
	}
	if seen[0].SequenceID == seen[1].SequenceID {
		t.Errorf("servers of different keys both name the question %q: made of the token and the ID alone", seen[0].SequenceID)
	}
}
