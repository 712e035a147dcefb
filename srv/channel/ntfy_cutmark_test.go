package channel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestNtfyPlainCutMark: a question too long for ntfy, sent as plain
// lines (its link names another place), ends with the mark saying the
// rest is in the app as plain words: ntfy shows such a message as it
// is, and the mark's markdown italics read as underscores.
func TestNtfyPlainCutMark(t *testing.T) {
	ntfy := newReceiver(t)
	text := "Sign in at [bank.example](https://evil.example/login) first.\n\n" + strings.Repeat("The copy mirrors every write. ", 200)
	n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, At: time.Now(),
		Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: text}}, AnswerURL: "https://aa.example/push/answer", Cap: "c"}
	if err := (&Ntfy{URL: ntfy.URL, Topic: "t"}).Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	_, bodies := ntfy.waitFor(t, 1)
	var m ntfyMessage
	if err := json.Unmarshal(bodies[0], &m); err != nil {
		t.Fatal(err)
	}
	if m.Markdown || !strings.Contains(m.Message, "(The rest is in the app.)") || strings.Contains(m.Message, "_(") {
		t.Errorf("markdown %v, message ends %q", m.Markdown, m.Message[max(0, len(m.Message)-80):])
	}
}
