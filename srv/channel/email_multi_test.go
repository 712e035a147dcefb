package channel

import (
	"strings"
	"testing"
)

// TestEmailRepliesSeveral: a mail asking a question that takes several
// options numbers them and says how to pick several; a reply naming
// options, by number ("1, 3") or by name a line, answers with those,
// one text each in the order offered, as the inbox answers; a reply in
// other words answers as it is.
func TestEmailRepliesSeveral(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	for i, c := range []struct{ reply, want string }{
		{"3, 1\r\n", "Web|Desktop"},
		{"mobile\r\nWeb\r\n", "Web|Mobile"},
		{"The web, and later the rest.\r\n", "The web, and later the rest."},
	} {
		answered := f.askSeveral(tokA, "q-"+string(rune('a'+i)))
		_, h, body := sink.wait(t, 2*i+1)
		if !strings.Contains(body, "1. Web\r\n  2. Mobile\r\n  3. Desktop") || !strings.Contains(body, "one or more") {
			t.Fatalf("mail:\n%s\nwant the options numbered and how to pick several", body)
		}
		id, _ := h.MessageID()
		box.deliver(t, "Ana <ana@example.org>", id, c.reply)
		if rep := waitAnswer(t, answered, logs); texts(rep) != c.want {
			t.Errorf("reply %q: the agent got %q, want %q", c.reply, texts(rep), c.want)
		}
		sink.wait(t, 2*i+2) // its follow-up
	}
}
