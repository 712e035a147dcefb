package channel

import (
	"context"
	"encoding/base64"
	"io"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestMailSubjectReadsAsWritten: an agent's name or question written
// as RFC 2047 encoded-words ("=?utf-8?b?…?=", plain ASCII, so the names
// and lines it is made of pass as one line) is not decoded by the
// person's mail reader into what a subject never shows as written: a
// right-to-left override turning the rest around ("exe.gpj" read as
// "jpg.exe"), line breaks. The subject reads
// back as the text the agent sent, encoded-words and all.
func TestMailSubjectReadsAsWritten(t *testing.T) {
	word := func(s string) string { return "=?utf-8?b?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	agent := word("Ops\r\nBcc: all@example.org")
	first := word("\u202eexe.gpj") + " =?utf-8?q?Deploy=E2=80=AE?= now?"
	sink, box := newSMTPSink(t), newIMAPBox(t)
	e := newEmail(sink, box, io.Discard)
	e.IMAPAddr = ""
	n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1",
		Text: first, AgentName: agent}}}
	if err := e.Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	_, h, _ := sink.wait(t, 1)
	subject, err := h.Subject()
	want := "[agentassistant] " + agent + " asks: " + first
	if err != nil || subject != want {
		t.Errorf("the subject reads %q (%v), want %q", subject, err, want)
	}
	for _, l := range strings.Split(h.Get("Subject"), "\r\n") {
		if len(l) > 998 {
			t.Errorf("a line of the subject is %d bytes", len(l))
		}
	}
}
