package channel

import (
	"bytes"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// deliverRaw puts the mail header + "\r\n" + body in the INBOX, a
// Message-ID of its own added.
func (b *imapBox) deliverRaw(t *testing.T, header, body string) {
	t.Helper()
	msg := "Message-ID: <" + wireID() + "@mail.example.org>\r\n" + header + "\r\n" + body
	if _, err := b.user.Append("INBOX", bytes.NewReader([]byte(msg)), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// replyHeader is the header of a reply from ana@example.org to the mail
// id, with extra lines.
func replyHeader(id string, extra ...string) string {
	h := "From: Ana <ana@example.org>\r\nTo: " + aaAddr + "\r\nSubject: Re: [agentassistant] shop\r\n" +
		"In-Reply-To: <" + id + ">\r\nReferences: <" + id + ">\r\n"
	for _, l := range extra {
		h += l + "\r\n"
	}
	return h
}

// TestEmailAutoRepliesAnswerNothing: what a machine writes back to the
// question's mail from the person's own address (an out-of-office reply,
// a vacation notice, a delivery report, the channel's own follow-up
// coming back to a shared mailbox) answers nothing, is left unread and
// is told in the log; the person's own reply after them answers.
func TestEmailAutoRepliesAnswerNothing(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()

	plain := "Content-Type: text/plain; charset=utf-8"
	box.deliverRaw(t, replyHeader(id, "Auto-Submitted: auto-replied", plain), "I am out of the office until Monday.\r\n")
	box.deliverRaw(t, replyHeader(id, "Auto-Submitted: Auto-Generated (vacation)", plain), "On holiday.\r\n")
	box.deliverRaw(t, replyHeader(id, "X-Autoreply: yes", plain), "Away.\r\n")
	box.deliverRaw(t, replyHeader(id, "X-Autorespond: Out of office", plain), "Away too.\r\n")
	box.deliverRaw(t, replyHeader(id, "Precedence: auto_reply", plain), "Gone fishing.\r\n")
	box.deliverRaw(t, replyHeader(id, "Precedence: bulk", plain), "Newsletter.\r\n")
	box.deliverRaw(t, replyHeader(id, "Return-Path: <>", plain), "Undeliverable.\r\n")
	box.deliverRaw(t, replyHeader(id, `Content-Type: multipart/report; report-type=delivery-status; boundary="b"`),
		"--b\r\nContent-Type: text/plain\r\n\r\nDelivery failed.\r\n--b--\r\n")
	box.deliverRaw(t, replyHeader(id, "Auto-Submitted: no (a person wrote it)", plain), "Ship it.\r\n")

	rep := waitAnswer(t, answered, logs)
	if got := rep.Contents[0].GetText().GetText(); got != "Ship it." {
		t.Fatalf("the agent got %q: a machine's reply answered the question", got)
	}
	logs.waitFor(t, "email: an automatic reply answers nothing")
	seen := box.seen(t)
	for uid := imap.UID(1); uid <= 8; uid++ {
		if seen[uid] {
			t.Errorf("the automatic reply %d was marked read", uid)
		}
	}
	if !seen[9] {
		t.Error("the person's reply was not marked read")
	}
	if n := strings.Count(logs.String(), "an automatic reply answers nothing"); n != 8 {
		t.Errorf("%d automatic replies told in the log, want 8:\n%s", n, logs.String())
	}
}
