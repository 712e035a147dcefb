package channel

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// loginGate is the password a test's mail servers take, switchable,
// counting the logins they refused.
type loginGate struct {
	mu      sync.Mutex
	pass    string
	refused int
	mails   int
}

func (g *loginGate) check(pass string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pass != g.pass {
		g.refused++
		return false
	}
	return true
}

func (g *loginGate) set(pass string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pass = pass
}

func (g *loginGate) counts() (refused, mails int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused, g.mails
}

// gateSMTP is an SMTP session that refuses a login not the gate's with
// 535, as SMTP servers do.
type gateSMTP struct{ g *loginGate }

func (s gateSMTP) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s gateSMTP) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, _, pass string) error {
		if !s.g.check(pass) {
			return smtp.ErrAuthFailed
		}
		return nil
	}), nil
}
func (gateSMTP) Mail(string, *smtp.MailOptions) error { return nil }
func (gateSMTP) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s gateSMTP) Data(r io.Reader) error {
	_, _ = io.Copy(io.Discard, r)
	s.g.mu.Lock()
	s.g.mails++
	s.g.mu.Unlock()
	return nil
}
func (gateSMTP) Reset()        {}
func (gateSMTP) Logout() error { return nil }

// gateIMAP is an IMAP session that refuses a login not the gate's with
// NO, as IMAP servers do.
type gateIMAP struct {
	imapserver.Session
	g *loginGate
}

func (s gateIMAP) Login(user, pass string) error {
	if !s.g.check(pass) {
		return imapserver.ErrAuthFailed
	}
	return s.Session.Login(user, imapPass)
}

// TestEmailLoginsRefused: SMTP's 535 and IMAP's NO to the login said
// "log in: ..." and neither which of smtp_user/smtp_password or
// imap_user/imap_password to check; the mailbox was logged in to again
// every minute, told each time. Now each login refused has its one
// line naming its settings, is tried again every few minutes, and the
// question held is mailed once the password is taken.
func TestEmailLoginsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		smtpGate, imapGate := &loginGate{pass: "smtp-right"}, &loginGate{pass: "imap-right"}
		smtpLn, imapLn := pipenet.New(), pipenet.New()
		ss := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return gateSMTP{smtpGate}, nil }))
		ss.Domain, ss.AllowInsecureAuth, ss.ErrorLog = "localhost", true, discardLog{}
		sdone := make(chan struct{})
		go func() { defer close(sdone); _ = ss.Serve(smtpLn) }() // ended by Cleanup's Close
		t.Cleanup(func() { _ = ss.Close(); <-sdone })
		mem := imapmemserver.New()
		user := imapmemserver.NewUser(aaAddr, imapPass)
		if err := user.Create("INBOX", nil); err != nil {
			t.Fatal(err)
		}
		mem.AddUser(user)
		is := imapserver.New(&imapserver.Options{
			NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
				return gateIMAP{mem.NewSession(), imapGate}, nil, nil
			},
			Caps: imap.CapSet{imap.CapIMAP4rev1: {}}, InsecureAuth: true, Logger: discardLog{},
		})
		idone := make(chan struct{})
		go func() { defer close(idone); _ = is.Serve(imapLn) }() // ended by Cleanup's Close
		t.Cleanup(func() { _ = is.Close(); <-idone })

		logs := &syncBuffer{wake: make(chan struct{}, 1)}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		e := &Email{SMTPAddr: "smtp.example.org:587", SMTPUser: aaAddr, SMTPPassword: "smtp-secret-Qx1",
			IMAPAddr: "imap.example.org:143", IMAPUser: aaAddr, IMAPPassword: "imap-secret-Wz2", TLS: "none",
			From: "Agent Assistant <" + aaAddr + ">", To: []string{"ana@example.org"}, Logger: log}
		e.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if strings.HasPrefix(addr, "smtp.") {
				return smtpLn.Dial(ctx, network, addr)
			}
			return imapLn.Dial(ctx, network, addr)
		}
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {e}}, Logger: log})
		t.Cleanup(m.Close)

		_ = askOn(t, h, "q-1")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		for name, g := range map[string]*loginGate{"SMTP": smtpGate, "IMAP": imapGate} {
			if refused, _ := g.counts(); refused > 6 {
				t.Errorf("%d %s logins refused in 30 minutes, want at most 6", refused, name)
			}
		}
		errs := levelLines(logs, "ERROR")
		if len(errs) != 2 {
			t.Fatalf("%d error lines for two logins refused, want 2:\n%s", len(errs), logs.String())
		}
		for _, want := range []string{`setting="` + emailSMTPLogin + `" said="the SMTP server answered 535`, `setting="` + emailIMAPLogin + `" said="the IMAP server answered NO`} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("no line with %s:\n%s", want, logs.String())
			}
		}
		if warns := levelLines(logs, "WARN"); len(warns) > 0 {
			t.Errorf("refused logins warned besides:\n%s", strings.Join(warns, ""))
		}
		if strings.Contains(logs.String(), "secret-") {
			t.Errorf("the log holds a password:\n%s", logs.String())
		}

		smtpGate.set("smtp-secret-Qx1")
		imapGate.set("imap-secret-Wz2")
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if _, mails := smtpGate.counts(); mails != 1 {
			t.Errorf("%d mails once the password was taken, want the question held", mails)
		}
		if got := strings.Count(logs.String(), "accepted again"); got != 2 {
			t.Errorf("%d lines saying a login is accepted again, want 2:\n%s", got, logs.String())
		}
	})
}
