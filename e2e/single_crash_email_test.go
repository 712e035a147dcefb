package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/mail"
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

// pollingIdle tells of what came before the IDLE began, as real servers
// do (imapmemserver's waits for the next change).
type pollingIdle struct{ imapserver.Session }

func (s pollingIdle) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
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

// startMailbox is an IMAP server with mailAA's INBOX.
func startMailbox(t *testing.T) (string, *imapmemserver.User) {
	mem, user := imapmemserver.New(), imapmemserver.NewUser(mailAA, mailPass)
	if err := user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return pollingIdle{mem.NewSession()}, nil, nil
		},
		Caps: imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}}, InsecureAuth: true, Logger: quiet{},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), user
}

// TestSingleEmailReplyAfterKill9: the question was mailed, the server
// was killed and started again; the person's reply to that mail answers
// the agent, and no mail tells them it was not taken.
func TestSingleEmailReplyAfterKill9(t *testing.T) {
	sink := startMailSink(t)
	imapAddr, box := startMailbox(t)
	config := fmt.Sprintf(`[channels.email]
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
`, sink.addr, mailAA, mailPass, mailAA, mailPerson, imapAddr, mailAA, mailPass, mailPerson)
	var asked string
	_, done := crashAsked(t, func(string) string { return config }, "Mailed before the crash?", func(s *server) {
		asked = strings.Trim(sink.wait(t, 1).Header.Get("Message-Id"), "<>")
		waitNotedHere(t, s)
	})
	reply := "From: " + mailPerson + "\r\nTo: " + mailAA + "\r\nSubject: Re: the question\r\n" +
		"Message-ID: <reply-1@example.org>\r\nIn-Reply-To: <" + asked + ">\r\nReferences: <" + asked + ">\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\nYes, go ahead.\r\n"
	if _, err := box.Append("INBOX", bytes.NewReader([]byte(reply)), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, done, "Yes, go ahead.")
	for _, m := range sink.said("Not taken") {
		t.Errorf("the person was mailed %q", m)
	}
}
