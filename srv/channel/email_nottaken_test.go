package channel

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
)

// deliverFrom puts in the INBOX a reply of ana@example.org to the mail
// id, with the Message-ID mid and extra header lines.
func (b *imapBox) deliverFrom(t *testing.T, mid, id, body string, extra ...string) {
	t.Helper()
	h := "Message-ID: <" + mid + ">\r\nFrom: Ana <ana@example.org>\r\nTo: " + aaAddr + "\r\nSubject: Re: [agentassistant] shop\r\n" +
		"In-Reply-To: <" + id + ">\r\nReferences: <" + id + ">\r\nContent-Type: text/plain; charset=utf-8\r\n"
	for _, l := range extra {
		h += l + "\r\n"
	}
	if _, err := b.user.Append("INBOX", strings.NewReader(h+"\r\n"+body), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEmailRefusedReplyIsAnswered: a reply the question refuses (a typed
// answer where it takes only its options) or that comes once it is
// settled is answered by a mail to its sender, in its thread, marked
// auto-replied, saying it was not taken and why, and quoting what they
// wrote; once for each reply mail (the same mail again gets none), never
// for an automatic mail, and at most maxNotTakenMails a minute to a
// sender.
func TestEmailRefusedReplyIsAnswered(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	start := time.Now()
	e.now = func() time.Time { return start } // the whole test within a minute of notices
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.askChoices(tokA, "r-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()

	box.deliverFrom(t, "typed@mail.example.org", id, "Maybe after lunch?\r\nThanks.\r\n\r\nOn Fri, aa wrote:\r\n> Done.\r\n")
	m, nh, body := sink.wait(t, 2)
	irt, _ := nh.MsgIDList("In-Reply-To")
	refs, _ := nh.MsgIDList("References")
	subject, _ := nh.Subject()
	if !slices.Equal(m.to, []string{"ana@example.org"}) || !slices.Equal(irt, []string{"typed@mail.example.org"}) ||
		!slices.Contains(refs, "typed@mail.example.org") || !slices.Contains(refs, id) || subject != "Re: [agentassistant] shop" ||
		nh.Get("Auto-Submitted") != "auto-replied" {
		t.Fatalf("the notice to %v, In-Reply-To %v, References %v, Subject %q, Auto-Submitted %q", m.to, irt, refs, subject, nh.Get("Auto-Submitted"))
	}
	for _, want := range []string{"Not taken", `"Continue"`, `"Ship it"`, "> Maybe after lunch?\r\n> Thanks."} {
		if !strings.Contains(body, want) {
			t.Errorf("the notice lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(string(m.data), tokA) {
		t.Error("the token was mailed")
	}
	eventually(t, "the refused reply marked read", func() bool { return box.seen(t)[1] })

	// The same mail again (delivered twice) is told nothing more; the
	// answer after it answers, and its follow-up is the next mail.
	box.deliverFrom(t, "typed@mail.example.org", id, "Maybe after lunch?\r\n")
	box.deliverFrom(t, "ship@mail.example.org", id, "Ship it\r\n")
	if rep := waitAnswer(t, answered, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it" {
		t.Fatalf("the agent got %+v", rep)
	}
	if _, _, body := sink.wait(t, 3); !strings.Contains(body, "No reply is needed any more") {
		t.Fatalf("the third mail is not the follow-up:\n%s", body)
	}

	// Once settled: told by whom it was answered. An automatic reply is
	// told nothing; a flood of replies, maxNotTakenMails a minute.
	box.deliverFrom(t, "away@mail.example.org", id, "I am away.\r\n", "Auto-Submitted: auto-replied")
	box.deliverFrom(t, "late@mail.example.org", id, "Roll back!\r\n")
	_, nh, body = sink.wait(t, 4)
	if irt, _ := nh.MsgIDList("In-Reply-To"); !slices.Equal(irt, []string{"late@mail.example.org"}) ||
		!strings.Contains(body, "answered already by ana@example.org") || !strings.Contains(body, "> Roll back!") {
		t.Fatalf("the notice of a late reply, In-Reply-To %v:\n%s", irt, body)
	}
	const flood = 20
	for i := range flood {
		box.deliverFrom(t, "flood"+strings.Repeat("x", i)+"@mail.example.org", id, "Again.\r\n")
	}
	last := imap.UID(5 + flood)
	eventually(t, "the flood looked at", func() bool { return box.seen(t)[last] })
	sink.mu.Lock()
	n := len(sink.mails)
	sink.mu.Unlock()
	if want := 2 + maxNotTakenMails; n != want {
		t.Errorf("%d mails after a flood of %d late replies, want %d (%d notices a minute)", n, flood, want, maxNotTakenMails)
	}
	if box.seen(t)[4] {
		t.Error("the automatic reply was marked read")
	}
	logs.waitFor(t, "too many")
}
