package channel

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Email sends questions as mails over SMTP (github.com/emersion/go-smtp)
// and takes the replies from a mailbox it watches with IMAP IDLE
// (github.com/emersion/go-imap/v2): a reply answers the question whose
// mail it is to (In-Reply-To or References), with the text above the
// quote, when it comes from one of Senders. When the question is settled
// a short follow-up in the same thread says so. A reply from one of
// Senders that is not taken (the question settled, or a typed answer
// where it takes only its options) is answered in its thread, saying
// why and quoting it (tellNotTaken).
//
// The From of a mail can be forged; a forger would also need the
// question's Message-ID, random and only in the mails sent to To.
type Email struct {
	// SMTPAddr is the SMTP server's host:port; SMTPUser and SMTPPassword
	// log in there (no login when SMTPUser is ""). Never logged.
	SMTPAddr, SMTPUser, SMTPPassword string
	// From is the mails' sender ("Agent Assistant <aa@example.org>");
	// To, their recipients.
	From string
	To   []string
	// IMAPAddr is the IMAP server's host:port ("" takes no replies);
	// IMAPUser and IMAPPassword log in there; Mailbox is watched
	// (default INBOX).
	IMAPAddr, IMAPUser, IMAPPassword string
	Mailbox                          string
	// Senders are the addresses whose replies answer (default To).
	Senders []string
	// TLS is "starttls" (the default), "tls" or "none".
	TLS string
	// TLSConfig, when set, checks the servers' certificates (tests).
	TLSConfig *tls.Config
	// Backoff is the first wait before logging in to IMAP again (default
	// 1s, doubling up to a minute).
	Backoff time.Duration
	Logger  *slog.Logger

	// dial connects to the servers (nil: TCP); tests give an in-memory
	// network.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// now is the clock (nil: time.Now).
	now func() time.Time

	sent sentQuestions[emailSent] // its mail, for the follow-up
	// answering: its notes, a question's Message-ID → the question
	// (asked), and once it is settled why a reply to it is not taken (by
	// whom and when it was answered, or that it timed out), for
	// whichever instance watches the mailbox; and the credentials
	// refused now, told what the watch's login finds.
	answering
	mu sync.Mutex // held alone
	// told: the reply mails (their Message-ID) told they were not taken.
	told map[string]bool
	// notices counts, by sender, the mails saying a reply was not taken.
	notices window

	// The watch's own, touched only by Listen's goroutine: the mailbox's
	// UIDVALIDITY and the last UID looked at.
	uidValidity uint32
	lastUID     imap.UID
	// unread is the reply whose text could not be read at the last
	// looks, and how many looks in a row that was so.
	unread      imap.UID
	unreadTries int
}

// emailSent is a question's mail, as the instance that sent it keeps it.
type emailSent struct {
	id string // its Message-ID
	q  asked
	// mailed: the question's mail went out (else no follow-up either).
	mailed bool
}

const (
	// maxReplySize bounds a reply fetched to be read; maxAnswer, its
	// answer.
	maxReplySize = 1 << 20
	maxAnswer    = 16 << 10
	// maxBatch bounds the new mails whose headers are read at once.
	maxBatch = 200
	// maxHeaderRead bounds the header fields read of a new mail: a
	// reply's are a few kilobytes, a thread of a thousand mails' fits.
	maxHeaderRead = 64 << 10
	// pollEvery is how often a server without IDLE is asked for news.
	pollEvery = time.Minute
	// maxReadTries bounds the looks in a row at a reply whose text
	// cannot be read: a connection dropped mid-read is over by then, a
	// mail the server cannot hand over (a damaged one) would else stop
	// every reply after it.
	maxReadTries = 3
	// maxNotTakenMails bounds the mails a sender is sent in a minute
	// saying their reply was not taken: whoever can forge their From
	// and knows a question's Message-ID must not make the server a
	// mail cannon.
	maxNotTakenMails = 5
)

// Name is "email".
func (*Email) Name() string { return "email" }

// lead: one instance at a time watches the mailbox (each would read,
// and answer, every reply).
func (e *Email) lead() string { return leadName("email", e.IMAPAddr, e.IMAPUser, e.mailbox()) }

func (e *Email) mailbox() string {
	if e.Mailbox == "" {
		return "INBOX"
	}
	return e.Mailbox
}

// noteKey names the note of the question of Message-ID id.
func (e *Email) noteKey(id string) string { return e.lead() + "." + id }

// redact keeps the passwords out of an error (a server may repeat what
// it was given).
func (e *Email) redact(err error) error { return redact(err, e.SMTPPassword, e.IMAPPassword) }

func (e *Email) log() *slog.Logger { return logOf(e.Logger) }

func (e *Email) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// Send mails n to To: a question, or the follow-up of a settled one.
func (e *Email) Send(ctx context.Context, n Notice) error {
	room := store.Room(n.Token)
	key := questionKey(room, n.Request.ID)
	sent, ok := e.sent.get(key)
	id := sent.id
	if n.Kind != hub.Asked {
		mine := ok // mailed from here, or another instance's noted mail
		if !ok {
			// Settled on another instance than the one that mailed it
			// (an outcome is told where it is written): its mail is
			// noted once it went out.
			var err error
			if sent, ok, err = e.sentNoted(ctx, room, n.Request.ID); err != nil || !ok {
				return err
			}
			id = sent.id
		}
		if !sent.mailed {
			if !mine {
				// Noted as it went out, not yet as gone: the instance
				// mailing it is at it. Try again (Manager's backoff).
				return errStillMailing
			}
			e.forget(ctx, key, id)
			return nil
		}
		if err := e.settled(ctx, id, sent.q, goneWhy(n), n.At); err != nil {
			return err
		}
		body := title(n) + ".\r\n\r\nNo reply is needed any more.\r\n"
		if err := e.mail(ctx, "Re: "+sent.q.Title, e.newID(), id, body); err != nil {
			return err
		}
		e.sent.forget(key)
		if err := deleteNote(ctx, e.notesOf(), e.sentKey(room, n.Request.ID)); err != nil {
			e.log().Warn("email: a settled question's note not forgotten", "err", err)
		}
		return nil
	}
	q := sent.q
	if !ok { // not a retry: the question's own Message-ID
		id = e.newID()
		q = asked{Room: room, Kind: n.Request.Kind, ID: n.Request.ID, Title: emailSubject(n)}
		if multiOf(n.Request) {
			// A reply naming several answers with them (multi.go).
			q.Labels, _ = buttonsOf(n.Request)
			q.Multi = true
		}
		if err := e.track(ctx, key, id, q, expiresOf(n.Event)); err != nil {
			return err
		}
	}
	body := Clip(withoutDataImages(n.Request.Text), 64<<10) + "\r\n\r\n"
	// A mail has no buttons: its options are written out.
	if opts, _ := described(n.Request); len(opts) > 0 {
		_, multi, custom := wire.OptionsOf(n.Request.Questions)
		how := "Answers offered: reply with one of them.\r\n"
		if multi {
			// Numbered, for a reply such as "1, 3".
			how = "Answers offered: reply with one or more of them, by their numbers (\"1, 3\") or their names, one a line.\r\n"
		}
		if custom {
			how = strings.TrimSuffix(how, ".\r\n") + ", or in your own words.\r\n"
		}
		body += how
		for i, o := range opts {
			if multi {
				body += "\r\n  " + strconv.Itoa(i+1) + ". " + o.line()
			} else {
				body += "\r\n  * " + o.line()
			}
		}
		body += "\r\n\r\n"
	}
	if !n.Test {
		body += "Reply to this e-mail to answer: what you write above the quoted text is your answer.\r\n"
	}
	if n.AppURL != "" {
		body += "Or answer in the app: " + n.AppURL + "\r\n"
	}
	if err := e.mail(ctx, q.Title, id, "", body); err != nil {
		return err
	}
	e.sent.update(key, func(s emailSent, ok bool) (emailSent, bool) {
		s.mailed = true
		return s, ok
	})
	if err := putJSON(ctx, e.notesOf(), e.sentKey(room, n.Request.ID), emailSentNote{id, q, true}, expiresOf(n.Event)); err != nil {
		e.log().Warn("email: a question's mail not noted; another instance will not follow it up", "err", err)
	}
	return nil
}

// errStillMailing: a question settled on this instance is being mailed
// by another, which has not yet noted that its mail went out.
var errStillMailing = errors.New("email: the question's mail is still going out from another instance")

// emailSentNote is a question's mail, for the instance that hears it is
// settled to follow it up: noted before it is sent (a reply may answer
// it at once, on any instance), and again once it went out (Mailed).
type emailSentNote struct {
	ID     string `json:"m"` // its Message-ID
	Q      asked  `json:"q"`
	Mailed bool   `json:"d,omitempty"`
}

// sentKey names the note of the mail of question id of room: apart
// from noteKey's, which end in any Message-ID a mail names.
func (e *Email) sentKey(room, id string) string { return "sent." + e.lead() + "." + room + "." + id }

// sentNoted is the mail of question id of room, as noted.
func (e *Email) sentNoted(ctx context.Context, room, id string) (emailSent, bool, error) {
	var sn emailSentNote
	ok, err := getJSON(ctx, e.notesOf(), e.sentKey(room, id), &sn)
	if err != nil || !ok {
		return emailSent{}, false, err
	}
	return emailSent{id: sn.ID, q: sn.Q, mailed: sn.Mailed}, true, nil
}

// goneWhy says why a reply to the question of n, settled, is not taken.
func goneWhy(n Notice) string {
	at := n.At.UTC().Format("Mon 2 Jan 2006 15:04 MST")
	switch n.Kind {
	case hub.Answered:
		by := ""
		if n.Reply != nil && n.Reply.Nickname != "" {
			by = " by " + Clip(n.Reply.Nickname, 64)
		}
		if n.Reply != nil && n.Reply.Door != "" {
			by += " (" + shownName(n.Reply.Door) + ")"
		}
		return "the question was answered already" + by + " on " + at
	case hub.TimedOut:
		return "the question is no longer waiting for an answer: it timed out on " + at
	default:
		return "the question is no longer waiting for an answer: it was withdrawn on " + at
	}
}

// settled notes why a reply to q, of Message-ID id, is no longer taken,
// for the replies that come after, whichever instance reads them.
func (e *Email) settled(ctx context.Context, id string, q asked, why string, at time.Time) error {
	if e.IMAPAddr == "" { // no reply comes
		return nil
	}
	q.Gone = why
	if err := putJSON(ctx, e.notesOf(), e.noteKey(id), q, at.Add(goneFor)); err != nil {
		return fmt.Errorf("email: %w", err)
	}
	return nil
}

// forget drops the question of key, of Message-ID id, whose mail never
// went out.
func (e *Email) forget(ctx context.Context, key, id string) {
	e.sent.forget(key)
	if err := deleteNote(ctx, e.notesOf(), e.noteKey(id)); err != nil {
		e.log().Warn("email: a question's note not forgotten", "err", err)
	}
}

// track notes that the mail of Message-ID id asks q, before it is sent:
// a reply can come only after, and be taken on any instance, which then
// waits for the mail to be noted as gone before it follows it up. What
// it asks is written to the store now, not kept to be written later
// (laterNotes): the watch passes over a reply whose question it cannot
// find, so the mail waits (Send fails, and is tried again) until it is.
func (e *Email) track(ctx context.Context, key, id string, q asked, until time.Time) error {
	if e.IMAPAddr != "" {
		if err := putNow(ctx, e.notesOf(), e.noteKey(id), q, until); err != nil {
			return fmt.Errorf("email: %w", err)
		}
	}
	if err := putJSON(ctx, e.notesOf(), e.sentKey(q.Room, q.ID), emailSentNote{ID: id, Q: q}, until); err != nil {
		return fmt.Errorf("email: %w", err)
	}
	e.sent.update(key, func(emailSent, bool) (emailSent, bool) { return emailSent{id: id, q: q}, true })
	return nil
}

// newID is a Message-ID (without its brackets): random, so that only
// who got the question can reply to it.
func (e *Email) newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	domain := "agentassistant.invalid"
	if a, err := mail.ParseAddress(e.From); err == nil {
		if _, d, ok := strings.Cut(a.Address, "@"); ok && d != "" {
			domain = d
		}
	}
	return hex.EncodeToString(b) + "@" + domain
}

// mail sends one text/plain mail to To; inReplyTo, when set, threads it.
// emailSubject is a question's subject: its headline, so that the
// mails of several questions tell them apart in a list.
func emailSubject(n Notice) string {
	return "[agentassistant] " + headline(n)
}

func (e *Email) mail(ctx context.Context, subject, id, inReplyTo, body string) error {
	var to []*mail.Address
	for _, s := range e.To {
		a, err := mail.ParseAddress(s)
		if err != nil {
			return fmt.Errorf("email: parse to: %w", err)
		}
		to = append(to, a)
	}
	var refs []string
	if inReplyTo != "" {
		refs = []string{inReplyTo}
	}
	return e.send(ctx, outMail{to: to, subject: subject, id: id, inReplyTo: refs, refs: refs, auto: "auto-generated", body: body})
}

// outMail is a mail the channel sends.
type outMail struct {
	to              []*mail.Address
	subject, id     string
	inReplyTo, refs []string // Message-IDs that thread it
	auto            string   // its Auto-Submitted (RFC 3834)
	body            string
}

// send sends m, text/plain.
func (e *Email) send(ctx context.Context, m outMail) error {
	from, err := mail.ParseAddress(e.From)
	if err != nil {
		return fmt.Errorf("email: parse from: %w", err)
	}
	var rcpt []string
	for _, a := range m.to {
		rcpt = append(rcpt, a.Address)
	}
	var h mail.Header
	h.SetDate(e.clock())
	h.SetAddressList("From", []*mail.Address{from})
	h.SetAddressList("To", m.to)
	h.Set("Subject", subjectField(m.subject))
	h.SetMessageID(m.id)
	if len(m.inReplyTo) > 0 {
		h.SetMsgIDList("In-Reply-To", m.inReplyTo)
	}
	if len(m.refs) > 0 {
		h.SetMsgIDList("References", m.refs)
	}
	h.Set("Auto-Submitted", m.auto)
	h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	var buf bytes.Buffer
	w, err := mail.CreateSingleInlineWriter(&buf, h)
	if err != nil {
		return fmt.Errorf("email: write the mail: %w", err)
	}
	_, _ = io.WriteString(w, m.body)
	if err := w.Close(); err != nil {
		return fmt.Errorf("email: write the mail: %w", err)
	}
	if err := e.submit(ctx, from.Address, rcpt, buf.Bytes()); err != nil {
		if re := refusedOf(err); re != nil {
			return re
		}
		return fmt.Errorf("email: send: %w%s", e.redact(err), tlsHint(err, "587", "465"))
	}
	return nil
}

// tlsHint is how to fix [channels.email] tls when err is a TLS
// handshake answered in the clear: tls = "tls" at a port that speaks
// STARTTLS (clear), whose server's implicit TLS port is implicit. The
// TLS error is known by its words too: go-imap's client formats a failed
// read of a response with %v, dropping it from the chain.
func tlsHint(err error, clear, implicit string) string {
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) && !strings.Contains(err.Error(), tlsInTheClear) {
		return ""
	}
	return ` (the server speaks in the clear first: check [channels.email] tls, tls = "starttls" at its port ` + clear + `, or "tls" at ` + implicit + `)`
}

// tlsInTheClear is what crypto/tls says of a TLS handshake answered in
// the clear.
const tlsInTheClear = "tls: first record does not look like a TLS handshake"

// subjectField is s as a Subject's field, shown as written: a reader
// decodes an encoded-word ("=?utf-8?b?…?=", RFC 2047) where it finds one,
// and one written by an agent may hold what its text never shows (a
// line break, a bidirectional control). A subject holding one is
// encoded whole, in words of at most 75 characters.
func subjectField(s string) string {
	if !strings.Contains(s, "=?") {
		return mime.QEncoding.Encode("utf-8", s)
	}
	var words []string
	for s != "" {
		n := min(len(s), 45) // 60 characters of base64
		for n > 1 && n < len(s) && !utf8.RuneStart(s[n]) {
			n--
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, " ")
}

// submit hands msg to the SMTP server, within ctx.
func (e *Email) submit(ctx context.Context, from string, to []string, msg []byte) error {
	conn, err := e.connect(ctx, e.SMTPAddr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	// go-smtp sets the connection's deadline itself before each command,
	// so a deadline of ours would be overwritten: the end of ctx (its
	// deadline or its cancel) closes the connection instead.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	var c *smtp.Client
	switch e.TLS {
	case "none":
		c = smtp.NewClient(conn)
	case "tls":
		c = smtp.NewClient(tls.Client(conn, e.tlsConfig(e.SMTPAddr)))
	default:
		if c, err = smtp.NewClientStartTLS(conn, e.tlsConfig(e.SMTPAddr)); err != nil {
			return err
		}
	}
	defer func() { _ = c.Close() }()
	if e.SMTPUser != "" {
		if err := c.Auth(sasl.NewPlainClient("", e.SMTPUser, e.SMTPPassword)); err != nil {
			if re := e.smtpRefusal(err); re != nil {
				return re
			}
			return fmt.Errorf("log in: %w", err)
		}
	}
	if err := c.SendMail(from, to, bytes.NewReader(msg)); err != nil {
		if re := e.smtpRefusal(err); re != nil {
			return re
		}
		return err
	}
	return c.Quit()
}

// The settings of the mailbox's logins.
const (
	emailSMTPLogin = "[channels.email] smtp_user, smtp_password"
	emailIMAPLogin = "[channels.email] imap_user, imap_password"
)

// smtpRefusal is err as the SMTP server's refusal of the login: 535
// (the user or password wrong), or 530 (a login needed, none set); nil
// when it is none.
func (e *Email) smtpRefusal(err error) *RefusedError {
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 535 && se.Code != 530 {
		return nil
	}
	said := serviceSaid("the SMTP server", strconv.Itoa(se.Code), Clip(e.redact(errors.New(se.Message)).Error(), 200))
	re := &RefusedError{Channel: "email", Setting: emailSMTPLogin, Said: said,
		Hint: "a provider with two-step login takes an app password, not the account's"}
	if se.Code == 530 && e.SMTPUser == "" {
		re.Hint = "the server asks for a login: set smtp_user and smtp_password"
	}
	return re
}

// imapRefusal is err, of LOGIN, as the IMAP server's refusal of it (NO
// or BAD); nil when it is none.
func (e *Email) imapRefusal(err error) *RefusedError {
	var ie *imap.Error
	if !errors.As(err, &ie) {
		return nil
	}
	said := serviceSaid("the IMAP server", string(ie.Type), Clip(e.redact(errors.New(ie.Text)).Error(), 200))
	return &RefusedError{Channel: "email", Setting: emailIMAPLogin, Said: said,
		Hint: "a provider with two-step login takes an app password, not the account's; some need IMAP turned on"}
}

// connect dials addr within ctx.
func (e *Email) connect(ctx context.Context, addr string) (net.Conn, error) {
	if e.dial != nil {
		return e.dial(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (e *Email) tlsConfig(addr string) *tls.Config {
	cfg := &tls.Config{}
	if e.TLSConfig != nil {
		cfg = e.TLSConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return cfg
}
