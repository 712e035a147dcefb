package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

const (
	mailAA     = "aa@example.org"
	mailPerson = "ana@example.org"
	mailPass   = "mail-pass-Kx71q"
)

// mailSink is an SMTP server that keeps what it is sent.
type mailSink struct {
	addr  string
	mu    sync.Mutex
	mails []string
	wake  chan struct{}
}

type sinkSession struct {
	s    *mailSink
	auth bool
}

func (s *sinkSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *sinkSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != mailAA || pass != mailPass {
			return errors.New("refused")
		}
		s.auth = true
		return nil
	}), nil
}
func (s *sinkSession) Mail(string, *smtp.MailOptions) error {
	if !s.auth {
		return smtp.ErrAuthRequired
	}
	return nil
}
func (s *sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.s.mu.Lock()
	s.s.mails = append(s.s.mails, string(b))
	s.s.mu.Unlock()
	s.s.wake <- struct{}{}
	return nil
}
func (s *sinkSession) Reset()        {}
func (s *sinkSession) Logout() error { return nil }

type quiet struct{}

func (quiet) Printf(string, ...any) {}
func (quiet) Println(...any)        {}

func startMailSink(t *testing.T) *mailSink {
	sink := &mailSink{wake: make(chan struct{}, 100)}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{s: sink}, nil }))
	srv.Domain, srv.AllowInsecureAuth, srv.ErrorLog = "localhost", true, quiet{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sink
}

// wait is the n-th mail sent, once it came.
func (s *mailSink) wait(t *testing.T, n int) *mail.Message {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		s.mu.Lock()
		var raw string
		if len(s.mails) >= n {
			raw = s.mails[n-1]
		}
		s.mu.Unlock()
		if raw != "" {
			m, err := mail.ReadMessage(strings.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("mail %d never sent", n)
		}
	}
}

// question is the mail that asks text, once it came: a question's own
// mail, not a follow-up in a thread (a question answered is followed up,
// so the n-th mail is not the n-th question's).
func (s *mailSink) question(t *testing.T, text string) *mail.Message {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		s.mu.Lock()
		mails := slices.Clone(s.mails)
		s.mu.Unlock()
		for _, raw := range mails {
			m, err := mail.ReadMessage(strings.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			body := m.Body
			if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
				body = quotedprintable.NewReader(body)
			}
			b, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			if m.Header.Get("In-Reply-To") == "" && strings.Contains(string(b), text) {
				m.Body = bytes.NewReader(b)
				return m
			}
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("the question %q was never mailed", text)
		}
	}
}

// said are the mails sent that contain part.
func (s *mailSink) said(part string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.mails {
		if strings.Contains(m, part) {
			out = append(out, m)
		}
	}
	return out
}

// mailbox is an IMAP server with mailAA's INBOX, which knows which of
// its sessions wait in IDLE.
type mailbox struct {
	addr string
	user *imapmemserver.User
	mu   sync.Mutex
	// idle holds the sessions in IDLE, each with the number of mails it
	// marked \Seen (a watcher that took that many replies).
	idle map[*boxSession]int
	wake chan struct{}
	// seen counts the mails marked \Seen; hold, when set, holds each
	// marking before it is made (holdSeen).
	seen int
	hold *seenHold
}

// seenHold holds the markings \Seen until release.
type seenHold struct {
	arrived, release chan struct{}
	once             sync.Once
}

// boxSession is a session of the mailbox.
type boxSession struct {
	imapserver.Session
	box    *mailbox
	marked int // under box.mu
}

func (s *boxSession) Store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags, options *imap.StoreOptions) error {
	seen := flags.Op == imap.StoreFlagsAdd && slices.Contains(flags.Flags, imap.FlagSeen)
	s.box.mu.Lock()
	h := s.box.hold
	s.box.mu.Unlock()
	if seen && h != nil {
		h.once.Do(func() { close(h.arrived) })
		<-h.release
		// Released once its session's watcher is dead: not made.
		return errors.New("the session is gone")
	}
	err := s.Session.Store(w, numSet, flags, options)
	if err == nil && seen {
		s.box.mu.Lock()
		s.marked++
		s.box.seen++
		s.box.mu.Unlock()
		s.box.changed()
	}
	return err
}

// holdSeen holds every marking \Seen, before it is made, until release
// (once): as a watcher that took a reply and dies before it marks it
// read. arrived is closed when the first comes; those held are not
// made, those after release are.
func (b *mailbox) holdSeen() (arrived <-chan struct{}, release func()) {
	h := &seenHold{arrived: make(chan struct{}), release: make(chan struct{})}
	b.mu.Lock()
	b.hold = h
	b.mu.Unlock()
	var once sync.Once
	return h.arrived, func() {
		once.Do(func() {
			b.mu.Lock()
			b.hold = nil
			b.mu.Unlock()
			close(h.release)
		})
	}
}

// waitSeen waits until n markings \Seen were made.
func (b *mailbox) waitSeen(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(45 * time.Second)
	for {
		b.mu.Lock()
		ok := b.seen >= n
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-b.wake:
		case <-deadline:
			t.Fatalf("fewer than %d mails were marked read", n)
		}
	}
}

// Idle tells of what came before the IDLE began, as real servers do
// (imapmemserver's waits for the next change), and looks again every
// few milliseconds.
func (s *boxSession) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	s.box.mu.Lock()
	s.box.idle[s] = s.marked
	s.box.mu.Unlock()
	s.box.changed()
	defer func() {
		s.box.mu.Lock()
		delete(s.box.idle, s)
		s.box.mu.Unlock()
		s.box.changed()
	}()
	for {
		if err := s.Poll(w, true); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-time.After(5 * time.Millisecond): // imapmemserver tells of no change made before the IDLE: look again
		}
	}
}

func (b *mailbox) changed() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// waitIdle waits until a session that marked at least marked mails
// \Seen waits in IDLE.
func (b *mailbox) waitIdle(t *testing.T, marked int) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		b.mu.Lock()
		ok := slices.ContainsFunc(slices.Collect(maps.Values(b.idle)), func(n int) bool { return n >= marked })
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-b.wake:
		case <-deadline:
			t.Fatalf("no session that marked %d mails waits in IDLE", marked)
		}
	}
}

// deliver puts raw in the INBOX, as the mail server does with a mail
// that arrives; idle are the mails marked by each session that waited
// in IDLE as it came.
func (b *mailbox) deliver(t *testing.T, raw string) (idle []int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.user.Append("INBOX", bytes.NewReader([]byte(raw)), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Values(b.idle))
}

// startMailbox is an IMAP server with mailAA's INBOX.
func startMailbox(t *testing.T) *mailbox {
	mem, user := imapmemserver.New(), imapmemserver.NewUser(mailAA, mailPass)
	if err := user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	box := &mailbox{user: user, idle: map[*boxSession]int{}, wake: make(chan struct{}, 1)}
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return &boxSession{Session: mem.NewSession(), box: box}, nil, nil
		},
		Caps: imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}}, InsecureAuth: true, Logger: quiet{},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return box
}

// emailConfig is the e-mail channel's config, mailing through sink
// and watching box.
func emailConfig(sink *mailSink, box *mailbox) string {
	return fmt.Sprintf(`[channels.email]
smtp_addr = %q
smtp_user = %q
smtp_password = %q
from = %q
to = [%q]
imap_addr = %q
imap_user = %q
imap_password = %q
mailbox = "INBOX"
senders = [%q]
tls = "none"
`, sink.addr, mailAA, mailPass, mailAA, mailPerson, box.addr, mailAA, mailPass, mailPerson)
}

// replyTo is the person's reply n, text, to the mail of Message-ID to.
func replyTo(n int, to, text string) string {
	return fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: Re: the question\r\nMessage-ID: <reply-%d@example.org>\r\n"+
		"In-Reply-To: <%s>\r\nReferences: <%s>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n", mailPerson, mailAA, n, to, to, text)
}

// messageID is m's Message-ID, without its brackets.
func messageID(m *mail.Message) string { return strings.Trim(m.Header.Get("Message-Id"), "<>") }

// TestSingleEmailReplyDuringIdle: one server watches the mailbox,
// waiting in IDLE, when the person's reply to a question's mail arrives:
// the agent has it. Then a second question, mailed after the first's
// follow-up, is answered the same way by a reply that arrives while the
// watch that took the first waits in IDLE again.
func TestSingleEmailReplyDuringIdle(t *testing.T) {
	sink := startMailSink(t)
	box := startMailbox(t)
	s := startSingle(t, freePort(t), t.TempDir(), emailConfig(sink, box))
	agent := startMCP(t, s, tokenA)
	for n, marked := range []int{0, 1} {
		question := fmt.Sprintf("Deploy build %d?", n+1)
		answer := fmt.Sprintf("Yes, build %d.", n+1)
		done := askAsync(agent, question)
		// Its note is written before it is mailed.
		asked := messageID(sink.question(t, question))
		box.waitIdle(t, marked)
		if idle := box.deliver(t, replyTo(n+1, asked, answer)); !slices.ContainsFunc(idle, func(m int) bool { return m >= marked }) {
			t.Fatalf("reply %d came while the sessions in IDLE had marked %v mails, want one with %d", n+1, idle, marked)
		}
		wantAnswer(t, done, answer)
	}
	for _, m := range sink.said("Not taken") {
		t.Errorf("the person was mailed %q", m)
	}
}

// TestSingleEmailReplyAfterKill9: the question was mailed, the server
// was killed and started again; the person's reply to that mail answers
// the agent, and no mail tells them it was not taken.
func TestSingleEmailReplyAfterKill9(t *testing.T) {
	sink := startMailSink(t)
	box := startMailbox(t)
	config := emailConfig(sink, box)
	var asked string
	_, done := crashAsked(t, func(string) string { return config }, "Mailed before the crash?", func(s *server) {
		asked = strings.Trim(sink.wait(t, 1).Header.Get("Message-Id"), "<>")
		waitNotedHere(t, s)
	})
	reply := "From: " + mailPerson + "\r\nTo: " + mailAA + "\r\nSubject: Re: the question\r\n" +
		"Message-ID: <reply-1@example.org>\r\nIn-Reply-To: <" + asked + ">\r\nReferences: <" + asked + ">\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\nYes, go ahead.\r\n"
	box.deliver(t, reply)
	wantAnswer(t, done, "Yes, go ahead.")
	for _, m := range sink.said("Not taken") {
		t.Errorf("the person was mailed %q", m)
	}
}
