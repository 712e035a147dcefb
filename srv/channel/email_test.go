package channel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

const (
	smtpPass = "smtp-pass-Zq81x"
	imapPass = "imap-pass-Hw27k"
	aaAddr   = "aa@example.org"
)

// smtpSink is an SMTP server (go-smtp) that keeps the mails it is given,
// after AUTH PLAIN with aaAddr and smtpPass; a wrong password is refused
// with a message that repeats it, as a careless server might.
type smtpSink struct {
	addr  string
	mu    sync.Mutex
	mails []sunkMail
	wake  chan struct{}
}

type sunkMail struct {
	from string
	to   []string
	data []byte
}

type sinkSession struct {
	s      *smtpSink
	authed bool
	m      sunkMail
}

func newSMTPSink(t *testing.T) *smtpSink {
	sink := &smtpSink{wake: make(chan struct{}, 100)}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{s: sink}, nil }))
	srv.Domain, srv.AllowInsecureAuth = "localhost", true
	srv.ErrorLog = discardLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sink
}

type discardLog struct{}

func (discardLog) Printf(string, ...any) {}
func (discardLog) Println(...any)        {}

func (s *sinkSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *sinkSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != aaAddr || pass != smtpPass {
			return errors.New("no such user with password " + pass)
		}
		s.authed = true
		return nil
	}), nil
}
func (s *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.m = sunkMail{from: from}
	return nil
}
func (s *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.m.to = append(s.m.to, to)
	return nil
}
func (s *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.m.data = b
	s.s.mu.Lock()
	s.s.mails = append(s.s.mails, s.m)
	s.s.mu.Unlock()
	s.s.wake <- struct{}{}
	return nil
}
func (s *sinkSession) Reset()        {}
func (s *sinkSession) Logout() error { return nil }

// wait waits for the n-th mail and parses it.
func (s *smtpSink) wait(t *testing.T, n int) (sunkMail, mail.Header, string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.mails)
		var m sunkMail
		if got >= n {
			m = s.mails[n-1]
		}
		s.mu.Unlock()
		if got >= n {
			r, err := mail.CreateReader(bytes.NewReader(m.data))
			if err != nil {
				t.Fatal(err)
			}
			p, err := r.NextPart()
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(p.Body)
			return m, r.Header, string(body)
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("%d mails, want %d", got, n)
		}
	}
}

// imapBox is an in-memory IMAP server (imapmemserver) with one user,
// aaAddr with imapPass, and an INBOX; a wrong password is refused with a
// message that repeats it.
type imapBox struct {
	mem  *imapmemserver.Server
	user *imapmemserver.User
	srv  *imapserver.Server
	addr string
	// wrap, when set before serve, wraps each session (a test's faults).
	wrap func(imapserver.Session) imapserver.Session
}

type echoSession struct{ imapserver.Session }

// Idle tells of what came before the IDLE began, as real servers do
// (imapmemserver's waits for the next change), and looks again every
// few milliseconds, so that a mail delivered between the client's last
// command and its IDLE is told too.
func (s echoSession) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	for {
		if err := s.Poll(w, true); err != nil {
			return err
		}
		again := make(chan struct{})
		time.AfterFunc(5*time.Millisecond, func() { close(again) })
		merged := make(chan struct{})
		go func() {
			select {
			case <-stop:
			case <-again:
			}
			close(merged)
		}()
		err := s.Session.Idle(w, merged)
		<-merged // at most 5 ms
		select {
		case <-stop:
			return err
		default:
		}
		if err != nil {
			return err
		}
	}
}

func (s echoSession) Login(user, pass string) error {
	if pass != imapPass {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Text: "no such user with password " + pass}
	}
	return s.Session.Login(user, pass)
}

func newIMAPBox(t *testing.T) *imapBox {
	b := &imapBox{mem: imapmemserver.New(), user: imapmemserver.NewUser(aaAddr, imapPass)}
	if err := b.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	b.mem.AddUser(b.user)
	b.serve(t, "127.0.0.1:0")
	return b
}

// serve starts a server of the box on addr.
func (b *imapBox) serve(t *testing.T, addr string) {
	b.srv = imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			var s imapserver.Session = echoSession{b.mem.NewSession()}
			if b.wrap != nil {
				s = b.wrap(s)
			}
			return s, nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}},
		InsecureAuth: true,
		Logger:       discardLog{},
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	srv := b.srv
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// deliver puts a mail in the INBOX, as the mail server does with one
// that arrives.
func (b *imapBox) deliver(t *testing.T, from, inReplyTo, body string) {
	t.Helper()
	msg := "From: " + from + "\r\nTo: Agent Assistant <" + aaAddr + ">\r\nSubject: Re: [agentassistant] shop\r\n" +
		"Message-ID: <" + wireID() + "@mail.example.org>\r\nIn-Reply-To: <" + inReplyTo + ">\r\nReferences: <" + inReplyTo + ">\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" + body
	if _, err := b.user.Append("INBOX", bytes.NewReader([]byte(msg)), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// seen reports which of the INBOX's mails (by UID) are \Seen.
func (b *imapBox) seen(t *testing.T) map[imap.UID]bool {
	t.Helper()
	c, err := imapclient.DialInsecure(b.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(aaAddr, imapPass).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	out := map[imap.UID]bool{}
	for _, m := range msgs {
		out[m.UID] = slices.Contains(m.Flags, imap.FlagSeen)
	}
	return out
}

var idSeq struct {
	sync.Mutex
	n int
}

func wireID() string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return "m" + strings.Repeat("x", idSeq.n)
}

// syncBuffer is a log's buffer that says when a line is written.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	wake chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits for the log to hold want.
func (s *syncBuffer) waitFor(t *testing.T, want string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if got := s.String(); strings.Contains(got, want) {
			return got
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("the log lacks %q:\n%s", want, s.String())
		}
	}
}

// waitAnswer waits for the agent's answer, showing the log when none comes.
func waitAnswer(t *testing.T, answered chan *hub.Reply, logs *syncBuffer) *hub.Reply {
	t.Helper()
	select {
	case rep := <-answered:
		return rep
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer; the log:\n%s", logs.String())
		return nil
	}
}

func newEmail(sink *smtpSink, box *imapBox, log io.Writer) *Email {
	return &Email{SMTPAddr: sink.addr, SMTPUser: aaAddr, SMTPPassword: smtpPass, From: "Agent Assistant <" + aaAddr + ">",
		To: []string{"ana@example.org"}, IMAPAddr: box.addr, IMAPUser: aaAddr, IMAPPassword: imapPass, TLS: "none",
		Backoff: time.Millisecond, Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// TestEmail: a question is mailed to `to` with a Message-ID of its own;
// a reply to it from a sender not in senders answers nothing and stays
// unread; a reply from an allowed sender (any case) answers with only
// the text above the quote, without the "On … wrote:" line and the
// signature, and is marked \Seen; then a follow-up in the same thread
// says the question is settled.
func TestEmail(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.ask(tokA, "q-1")
	m, h, body := sink.wait(t, 1)
	if m.from != aaAddr || !slices.Equal(m.to, []string{"ana@example.org"}) {
		t.Fatalf("envelope %s → %v", m.from, m.to)
	}
	id, _ := h.MessageID()
	subject, _ := h.Subject()
	if id == "" || subject != "[agentassistant] shop · Claude Code asks: Deploy now?" || !strings.Contains(body, "Deploy **now**?") ||
		!strings.Contains(body, "Reply to this e-mail to answer") {
		t.Fatalf("mail %q %q:\n%s", id, subject, body)
	}
	if strings.Contains(string(m.data), tokA) {
		t.Error("the token was mailed")
	}

	box.deliver(t, "Mallory <mallory@example.org>", id, "Yes, deploy.\r\n")
	box.deliver(t, "Ana <Ana@Example.org>", id, "Ship it after lunch.\r\nThanks.\r\n\r\n"+
		"On Fri, 27 Nov 2026 at 10:00, Agent Assistant <aa@example.org>\r\nwrote:\r\n> Deploy **now**?\r\n>\r\n> Reply to this e-mail\r\n\r\n-- \r\nAna\r\n")
	rep := waitAnswer(t, answered, logs)
	if rep == nil || rep.Contents[0].GetText().GetText() != "Ship it after lunch.\nThanks." || rep.Door != "email" ||
		rep.Nickname != "ana@example.org" {
		t.Fatalf("the agent got %+v", rep)
	}
	// Marked read once its answer is saved: after the agent has it.
	eventually(t, "the answer marked read", func() bool { return box.seen(t)[2] })
	if seen := box.seen(t); seen[1] {
		t.Errorf("seen %v, want only the answer's (2)", seen)
	}
	logs.waitFor(t, "mallory@example.org")

	_, h2, body2 := sink.wait(t, 2)
	irt, _ := h2.MsgIDList("In-Reply-To")
	refs, _ := h2.MsgIDList("References")
	subject2, _ := h2.Subject()
	if !slices.Equal(irt, []string{id}) || !slices.Equal(refs, []string{id}) || subject2 != "Re: "+subject ||
		!strings.Contains(body2, "Answered on ana@example.org") {
		t.Errorf("follow-up %v %v %q:\n%s", irt, refs, subject2, body2)
	}
}

// TestEmailSecrets: with wrong passwords, that both servers repeat in
// their refusals, neither Send's error nor the log shows them.
func TestEmailSecrets(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	e.SMTPPassword, e.IMAPPassword = "wrong-smtp-Kk3", "wrong-imap-Pp9"
	n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Deploy?"}}}
	err := e.Send(context.Background(), n)
	if err == nil || !strings.Contains(err.Error(), "no such user with password") {
		t.Fatalf("Send: %v", err)
	}
	if strings.Contains(err.Error(), e.SMTPPassword) {
		t.Errorf("Send's error shows the password: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Listen(ctx, Answers{}) }()
	got := logs.waitFor(t, "no such user with password")
	cancel()
	within(t, "end of Listen after its context", done)
	if strings.Contains(got, e.IMAPPassword) || strings.Contains(got, e.SMTPPassword) {
		t.Errorf("the log shows a password:\n%s", got)
	}
}

// TestEmailReconnects: when the IMAP server goes away and comes back,
// the channel logs in again and a reply that arrived meanwhile answers.
func TestEmailReconnects(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	logs.waitFor(t, "email: watching the mailbox")
	addr := box.addr
	_ = box.srv.Close()
	logs.waitFor(t, "email: watching the mailbox stopped")
	box.deliver(t, "ana@example.org", id, "Later.\r\n")
	box.serve(t, addr)
	if rep := waitAnswer(t, answered, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Later." {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestEmailSendEndsWithContext: a send to an SMTP server that never
// answers ends when its context does (the Manager's timeout or Close),
// so a hung server holds up nothing else.
func TestEmailSendEndsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, silent
		}
	}()
	e := &Email{SMTPAddr: ln.Addr().String(), From: aaAddr, To: []string{"ana@example.org"}, TLS: "none"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.Send(ctx, Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: hub.Request{Kind: wire.AskQuestion, ID: "q"}}})
	}()
	c := within(t, "connection", accepted)
	defer c.Close()
	cancel()
	if err := within(t, "end of Send after its context", done); err == nil {
		t.Fatal("Send to a silent server succeeded")
	}
}

// TestEmailNoFollowUpForUnsent: a question whose mail never went out
// gets no "settled" follow-up either.
func TestEmailNoFollowUpForUnsent(t *testing.T) {
	sink := newSMTPSink(t)
	e := &Email{SMTPAddr: "127.0.0.1:1", SMTPUser: aaAddr, SMTPPassword: smtpPass, From: aaAddr, To: []string{"ana@example.org"}, TLS: "none"}
	req := hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Deploy?"}
	if err := e.Send(context.Background(), Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: req}}); err == nil {
		t.Fatal("Send to no server succeeded")
	}
	e.SMTPAddr = sink.addr
	if err := e.Send(context.Background(), Notice{Event: hub.Event{Kind: hub.Answered, Token: tokA, Request: req}}); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.mails) != 0 {
		t.Errorf("a follow-up for a question never mailed:\n%s", sink.mails[0].data)
	}
}

// TestEmailFollowUpWaitsForTheMail: in a cluster a reply may be taken,
// and the question settled, on another instance while the one mailing
// the question has noted its mail but not yet that it went out. The
// instance told of the outcome does not drop the follow-up: it says the
// mail is still going out (the Manager tries again), and mails the
// follow-up once the mail is noted as gone.
func TestEmailFollowUpWaitsForTheMail(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	notes := NewMemoryNotes(nil)
	mailer, told := newEmail(sink, box, io.Discard), newEmail(sink, box, io.Discard)
	mailer.useNotes(notes)
	told.useNotes(notes)
	req := hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "Deploy?", Timeout: time.Hour}
	q := asked{Room: store.Room(tokA), Kind: req.Kind, ID: req.ID, Title: "[agentassistant] Deploy?"}
	ctx := context.Background()
	if err := mailer.track(ctx, store.Room(tokA)+"\x00q", "q-mail@example.org", q, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	answered := Notice{Event: hub.Event{Kind: hub.Answered, Token: tokA, Request: req, At: time.Now()}}
	if err := told.Send(ctx, answered); !errors.Is(err, errStillMailing) {
		t.Fatalf("settled while the question's mail goes out elsewhere: %v, want it tried again", err)
	}
	if err := putJSON(ctx, notes, mailer.sentKey(q.Room, q.ID), emailSentNote{"q-mail@example.org", q, true}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := told.Send(ctx, answered); err != nil {
		t.Fatal(err)
	}
	if _, h, _ := sink.wait(t, 1); !slices.Equal(must(h.MsgIDList("In-Reply-To")), []string{"q-mail@example.org"}) {
		t.Errorf("the follow-up is not in the question's thread: %v", h)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEmailReplyHint: the mail's hint on how to answer stands after a
// blank line, with no stray line of a lone "-" (which reads as a
// leftover, not a rule) before it, with options and without.
func TestEmailReplyHint(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	e := newEmail(sink, box, io.Discard)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	f.ask(tokA, "q-1")
	f.askChoices(tokA, "q-2")
	for n := 1; n <= 2; n++ {
		_, _, body := sink.wait(t, n)
		lines := strings.Split(body, "\r\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Reply to this e-mail") })
		if i < 1 || lines[i-1] != "" || slices.Contains(lines, "-") {
			t.Errorf("mail %d:\n%s", n, body)
		}
	}
}
