package channel

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// deliverRaw puts the mail header + "\r\n" + body in the INBOX, a
// Message-ID of its own added.
// replyText is the text readMail finds in raw.
func replyText(raw []byte) string {
	text, _ := readMail(raw)
	return text
}

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
	// Marked read once its answer is saved: after the agent has it.
	eventually(t, "the person's reply marked read", func() bool { return box.seen(t)[9] })
	seen := box.seen(t)
	for uid := imap.UID(1); uid <= 8; uid++ {
		if seen[uid] {
			t.Errorf("the automatic reply %d was marked read", uid)
		}
	}
	if n := strings.Count(logs.String(), "an automatic reply answers nothing"); n != 8 {
		t.Errorf("%d automatic replies told in the log, want 8:\n%s", n, logs.String())
	}
}

// TestReplyTextOddEncodings: a reply's text is read whatever its mail
// program did to it: a charset or a transfer encoding this server does
// not know (its bytes taken as they are, the hub making them UTF-8),
// in a part of a multipart mail as at the top, or quoted-printable with
// a broken escape.
func TestReplyTextOddEncodings(t *testing.T) {
	for _, c := range []struct{ name, mail, want string }{
		{"unknown charset", "Content-Type: text/plain; charset=x-unknown-42\r\n\r\nShip it.\r\n", "Ship it."},
		{"unknown charset in a part", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/plain; charset=x-unknown-42\r\n\r\nShip it.\r\n--b--\r\n", "Ship it."},
		{"unknown transfer encoding", "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: x-weird\r\n\r\nShip it.\r\n", "Ship it."},
		{"unknown transfer encoding in a part", "Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/plain\r\nContent-Transfer-Encoding: x-weird\r\n\r\nShip it.\r\n--b--\r\n", "Ship it."},
		{"broken quoted-printable", "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
			"Ship =ZZ it =E2=9C=93 now=\r\n.\r\n", "Ship =ZZ it ✓ now."},
		{"latin-1", "Content-Type: text/plain; charset=iso-8859-1\r\n\r\n\xdcber.\r\n", "Über."},
		{"no content type", "\r\nShip it.\r\n", "Ship it."},
		{"a text attachment first", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/plain\r\nContent-Disposition: attachment; filename=log.txt\r\n\r\nlog\r\n--b\r\n" +
			"Content-Type: text/plain\r\n\r\nShip it.\r\n--b--\r\n", "Ship it."},
		{"HTML only", "Content-Type: text/html; charset=utf-8\r\n\r\n<html><head><style>p{color:red}</style></head><body>" +
			"<p>Ship it &amp; tell me.</p><div>After <b>lunch</b>.<br>Thanks</div>" +
			"<div class=\"gmail_quote\"><div>On Fri, Agent Assistant wrote:</div><blockquote>Deploy now?</blockquote></div></body></html>\r\n",
			"Ship it & tell me.\nAfter lunch.\nThanks"},
		{"HTML only, quoted as Apple Mail does", "Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/html\r\n\r\n<div>Yes</div><div><br><blockquote type=\"cite\">On 27 Nov, aa wrote:<br>Deploy?</blockquote></div>\r\n--b--\r\n", "Yes"},
		{"plain text before HTML", "Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/html\r\n\r\n<p>the HTML</p>\r\n--b\r\nContent-Type: text/plain\r\n\r\nthe text\r\n--b--\r\n", "the text"},
		{"nested too deep", nested(maxDepth+1, "Ship it."), ""},
		{"nested", nested(maxDepth-1, "Ship it."), "Ship it."},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := replyText([]byte("From: ana@example.org\r\n" + c.mail)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// nested is a mail's Content-Type and body: text in depth multiparts,
// one in another.
func nested(depth int, text string) string {
	body := "Content-Type: text/plain\r\n\r\n" + text + "\r\n"
	for i := range depth {
		b := "b" + strconv.Itoa(i)
		body = "Content-Type: multipart/mixed; boundary=" + b + "\r\n\r\n--" + b + "\r\n" + body + "--" + b + "--\r\n"
	}
	return body
}

// countingProxy forwards connections to addr, counting the bytes the
// server sends.
type countingProxy struct {
	addr string
	got  atomic.Int64
}

func newCountingProxy(t *testing.T, to string) *countingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() { // the accept loop, ended by Cleanup's Close
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				_ = c.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			wg.Go(func() { _, _ = io.Copy(countingWriter{c, &p.got}, s); _ = c.Close() })
		}
	})
	return p
}

// countingWriter adds what it writes to n as it goes.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// TestEmailHugeHeaderReadBounded: anyone can mail the watched mailbox;
// mails with headers of megabytes (a References line naming the
// question among thousands) cost a bounded read, and the person's reply
// after them answers.
func TestEmailHugeHeaderReadBounded(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	proxy := newCountingProxy(t, box.addr)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	e.IMAPAddr = proxy.addr
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()

	const bombs, refs = 3, 60_000 // each header about 1.5 MiB
	var long strings.Builder
	for i := range refs {
		long.WriteString(" <" + strconv.Itoa(i) + "-padding-padding@example.org>")
	}
	for range bombs {
		box.deliverRaw(t, "From: Ana <ana@example.org>\r\nTo: "+aaAddr+"\r\nSubject: Re: [agentassistant] shop\r\n"+
			"References:"+long.String()+" <"+id+">\r\n", "Yes\r\n")
	}
	box.deliver(t, "ana@example.org", id, "Ship it.\r\n")
	if rep := waitAnswer(t, answered, logs); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	if got := proxy.got.Load(); got > 1<<20 {
		t.Errorf("read %d bytes from the IMAP server for %d mails of %d bytes of header each", got, bombs, long.Len())
	}
}

// TestEmailReplyNotSavedIsTakenLater: a reply whose answer the server
// cannot save now (its store is full) is not marked read nor passed
// over: once the store takes writes again, it answers.
func TestEmailReplyNotSavedIsTakenLater(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	shared := newMemShared(t, tokA)
	h := hub.New(hub.Options{Shared: shared})
	shared.hub.Store(h)
	t.Cleanup(h.Close)
	m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {e}}})
	t.Cleanup(m.Close)
	answered := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		answered <- rep
	}()
	_, mh, _ := sink.wait(t, 1)
	id, _ := mh.MessageID()
	logs.waitFor(t, "email: watching the mailbox")

	shared.fail.Store(true)
	box.deliver(t, "ana@example.org", id, "Ship it.\r\n")
	logs.waitFor(t, "no space left on device")
	if box.seen(t)[1] {
		t.Error("a reply not saved was marked read")
	}
	shared.fail.Store(false)
	if rep := waitAnswer(t, answered, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	eventually(t, "the reply marked read", func() bool { return box.seen(t)[1] })
}

// TestEmailFloodHidesNoReply: a flood of mail to the watched folder (more
// than one look takes) does not hide the person's reply among it: every
// new mail is looked at, a bounded number at a time.
func TestEmailFloodHidesNoReply(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	logs.waitFor(t, "email: watching the mailbox")
	addr := box.addr
	_ = box.srv.Close() // all of it arrives while the server is away
	logs.waitFor(t, "email: watching the mailbox stopped")
	for i := range maxBatch + 50 {
		if i == 10 {
			box.deliver(t, "ana@example.org", id, "Ship it.\r\n")
		}
		box.deliverRaw(t, "From: Spam <spam@example.com>\r\nTo: "+aaAddr+"\r\nSubject: Offer "+strconv.Itoa(i)+"\r\n", "Buy now.\r\n")
	}
	box.serve(t, addr)
	if rep := waitAnswer(t, answered, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
}

// FuzzReplyText: whatever a mail holds, reading its answer neither
// panics nor yields more than maxAnswer bytes.
func FuzzReplyText(f *testing.F) {
	f.Add([]byte("From: a@b\r\nContent-Type: text/plain\r\n\r\nShip it.\r\n> quoted\r\n"))
	f.Add([]byte("From: a@b\r\nContent-Type: text/html\r\n\r\n<p>Yes<br/></p><style>x<blockquote>On x wrote:</blockquote>"))
	f.Add([]byte("From: a@b\r\n" + nested(3, "Yes")))
	f.Add([]byte("From: a@b\r\nContent-Type: text/plain; charset=x-unknown\r\nContent-Transfer-Encoding: x-odd\r\n\r\n\xff\xfe"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got := replyText(raw); len(got) > maxAnswer {
			t.Fatalf("%d bytes of answer", len(got))
		}
	})
}

// FuzzHTMLText: whatever HTML a reply holds, reading its text neither
// panics nor yields more than it was given.
func FuzzHTMLText(f *testing.F) {
	f.Add("<div>Yes</div><div class=\"gmail_quote\">On x wrote:</div>")
	f.Add("<head><title>t</title></head><body>a<br>b</body>")
	f.Add("<style>unclosed <p>x")
	f.Add("a < b > c &amp; <")
	f.Fuzz(func(t *testing.T, s string) {
		if got := htmlText(s); len(got) > len(s) {
			t.Fatalf("%q from %q", got, s)
		}
	})
}

// TestEmailLargeReplyAnswers: a reply with a large attachment that says
// it is no image (a document) answers with its text, read alone: the
// attachment is not fetched.
func TestEmailLargeReplyAnswers(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	proxy := newCountingProxy(t, box.addr)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	e.IMAPAddr = proxy.addr
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	doc := strings.Repeat(strings.Repeat("QUJD", 19)+"\r\n", 40_000) // 3 MiB of base64
	box.deliverRaw(t, replyHeader(id, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="b1"`),
		"--b1\r\nContent-Type: multipart/alternative; boundary=\"b2\"\r\n\r\n"+
			"--b2\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nShip it, =FCber-quick.\r\n\r\nOn Fri, aa wrote:\r\n> Deploy?\r\n"+
			"--b2\r\nContent-Type: text/html\r\n\r\n<p>Ship it</p>\r\n--b2--\r\n"+
			"--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=report.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n"+doc+"--b1--\r\n")
	if rep := waitAnswer(t, answered, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it, über-quick." || len(rep.Contents) != 2 {
		t.Fatalf("the agent got %+v", rep)
	}
	eventually(t, "the reply marked read", func() bool { return box.seen(t)[1] })

	// Not multipart: a long quote below a short answer.
	second := f.ask(tokA, "q-2")
	_, h, _ = sink.wait(t, 3) // the second is the first question's follow-up
	id, _ = h.MessageID()
	box.deliverRaw(t, replyHeader(id, "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: quoted-printable"),
		"Wait for =C3=BCber-review.\r\n\r\n"+strings.Repeat("> "+strings.Repeat("q", 70)+"\r\n", 30_000))
	if rep := waitAnswer(t, second, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Wait for über-review." {
		t.Fatalf("the agent got %+v", rep)
	}
	if got := proxy.got.Load(); got > 3<<20 {
		t.Errorf("read %d bytes from the IMAP server to answer with two replies' text", got)
	}
}
