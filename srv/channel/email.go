package channel

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // replies in any charset
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/agentassistant/agentassistant/internal/opt"
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

	mu   sync.Mutex               // held alone
	sent map[string]string        // room + "\x00" + request ID → its Message-ID
	asks map[string]emailQuestion // a Message-ID → the question it asks
	// gone: a settled question's Message-ID → the question, and why a
	// reply to it is not taken (by whom and when it was answered, or
	// that it timed out).
	gone map[string]goneQuestion
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

type emailQuestion struct {
	token string
	kind  wire.Kind
	id    string
	title string
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
	key := store.Room(n.Token) + "\x00" + n.Request.ID
	e.mu.Lock()
	id := e.sent[key]
	var q emailQuestion
	if id != "" {
		q = e.asks[id]
	}
	e.mu.Unlock()
	if n.Kind != hub.Asked {
		if id == "" {
			return nil
		}
		if !q.mailed {
			e.forget(key, id)
			return nil
		}
		e.settled(id, q, goneWhy(n))
		body := title(n) + ".\r\n\r\nNo reply is needed any more.\r\n"
		if err := e.mail(ctx, "Re: "+q.title, e.newID(), id, body); err != nil {
			return err
		}
		e.forget(key, id)
		return nil
	}
	if id == "" { // not a retry: the question's own Message-ID
		id = e.newID()
		e.track(key, id, emailQuestion{token: n.Token, kind: n.Request.Kind, id: n.Request.ID, title: "[agentassistant] " + title(n)})
	}
	body := Clip(n.Request.Text, 64<<10) + "\r\n\r\n-\r\nReply to this e-mail to answer; the first line(s) above the quote are your answer.\r\n"
	if n.AppURL != "" {
		body += "Or answer in the app: " + n.AppURL + "\r\n"
	}
	if err := e.mail(ctx, "[agentassistant] "+title(n), id, "", body); err != nil {
		return err
	}
	e.mu.Lock()
	if q, ok := e.asks[id]; ok {
		q.mailed = true
		e.asks[id] = q
	}
	e.mu.Unlock()
	return nil
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

type goneQuestion struct {
	q   emailQuestion
	why string
}

// settled keeps why a reply to q, of Message-ID id, is no longer taken,
// for the replies that come after.
func (e *Email) settled(id string, q emailQuestion, why string) {
	if e.IMAPAddr == "" { // no reply comes
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone == nil {
		e.gone = map[string]goneQuestion{}
	}
	if _, ok := e.gone[id]; !ok && len(e.gone) >= maxTracked {
		for k := range e.gone { // forget one: a reply to it then goes untold
			delete(e.gone, k)
			break
		}
	}
	e.gone[id] = goneQuestion{q, why}
}

func (e *Email) forget(key, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sent, key)
	delete(e.asks, id)
}

func (e *Email) track(key, id string, q emailQuestion) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sent == nil {
		e.sent, e.asks = map[string]string{}, map[string]emailQuestion{}
	}
	if len(e.asks) >= maxTracked {
		for k, q := range e.asks { // forget one: its reply then goes unanswered
			delete(e.asks, k)
			delete(e.sent, store.Room(q.token)+"\x00"+q.id)
			break
		}
	}
	e.sent[key] = id
	e.asks[id] = q
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
	h.SetSubject(m.subject)
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
		return fmt.Errorf("email: send: %w", e.redact(err))
	}
	return nil
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
			return fmt.Errorf("log in: %w", err)
		}
	}
	if err := c.SendMail(from, to, bytes.NewReader(msg)); err != nil {
		return err
	}
	return c.Quit()
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

// Listen watches the mailbox for replies until ctx ends, logging in again
// with backoff when the server goes away.
func (e *Email) Listen(ctx context.Context, a Answers) {
	if e.IMAPAddr == "" {
		return
	}
	first := e.Backoff
	opt.Default(&first, time.Second)
	wait := first
	for {
		watched, err := e.watch(ctx, a)
		if ctx.Err() != nil {
			return
		}
		if watched {
			wait = first
		}
		e.log().Warn("email: watching the mailbox stopped; trying again", "err", e.redact(err), "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// watch logs in, takes the replies there are and those that come, until
// the connection or ctx ends; watched says it took every reply there
// was at least once (a reply whose answer the store cannot save, during
// an outage, fails the first look on every login: the backoff then
// grows rather than starting again).
func (e *Email) watch(ctx context.Context, a Answers) (watched bool, err error) {
	news := make(chan struct{}, 1)
	opts := &imapclient.Options{TLSConfig: e.tlsConfig(e.IMAPAddr), UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				select {
				case news <- struct{}{}:
				default:
				}
			}
		},
	}}
	conn, err := e.connect(ctx, e.IMAPAddr)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	var c *imapclient.Client
	switch e.TLS {
	case "none":
		c = imapclient.New(conn, opts)
	case "tls":
		cfg := opts.TLSConfig.Clone()
		cfg.NextProtos = []string{"imap"}
		c = imapclient.New(tls.Client(conn, cfg), opts)
	default:
		if c, err = imapclient.NewStartTLS(conn, opts); err != nil {
			return false, fmt.Errorf("connect: %w", err)
		}
	}
	defer func() { _ = c.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if err := c.Login(e.IMAPUser, e.IMAPPassword).Wait(); err != nil {
		return false, fmt.Errorf("log in: %w", err)
	}
	box := e.Mailbox
	if box == "" {
		box = "INBOX"
	}
	sel, err := c.Select(box, nil).Wait()
	if err != nil {
		return false, fmt.Errorf("select %s: %w", box, err)
	}
	if sel.UIDValidity != e.uidValidity { // UIDs from before mean nothing
		e.uidValidity, e.lastUID = sel.UIDValidity, 0
	}
	e.log().Debug("email: watching the mailbox", "mailbox", box)
	idle := c.Caps().Has(imap.CapIdle)
	for {
		if err := e.take(ctx, c, a); err != nil {
			return watched, err
		}
		watched = true
		if !idle {
			select {
			case <-news:
			case <-time.After(pollEvery):
			case <-c.Closed():
				return true, errors.New("the connection closed")
			}
			if err := c.Noop().Wait(); err != nil {
				return true, fmt.Errorf("noop: %w", err)
			}
			continue
		}
		cmd, err := c.Idle()
		if err != nil {
			return true, fmt.Errorf("idle: %w", err)
		}
		// IDLE is renewed every pollEvery: a server that missed telling
		// of a mail, or a connection dropped without a word, costs at
		// most that long (RFC 2177 asks for less than 29 minutes).
		renew := time.NewTimer(pollEvery)
		select {
		case <-news:
		case <-renew.C:
		case <-c.Closed():
		}
		renew.Stop()
		_ = cmd.Close()
		if err := cmd.Wait(); err != nil {
			return true, fmt.Errorf("idle: %w", err)
		}
		select {
		case <-c.Closed():
			return true, errors.New("the connection closed")
		default:
		}
	}
}

// take looks at the unread mails that came since the last look, and
// answers with the replies to questions from allowed senders.
func (e *Email) take(ctx context.Context, c *imapclient.Client, a Answers) error {
	crit := &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}
	if e.lastUID > 0 {
		crit.UID = []imap.UIDSet{{imap.UIDRange{Start: e.lastUID + 1, Stop: 0}}}
	}
	data, err := c.UIDSearch(crit, nil).Wait()
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	var uids []imap.UID
	for _, u := range data.AllUIDs() {
		if u > e.lastUID { // "n:*" holds the last mail even below n
			uids = append(uids, u)
		}
	}
	if len(uids) == 0 {
		return nil
	}
	// Every new mail is looked at, oldest first, maxBatch at a time: a
	// flood of mail costs reads in proportion, and hides no reply.
	slices.Sort(uids)
	for len(uids) > 0 {
		n := min(len(uids), maxBatch)
		if err := e.takeBatch(ctx, c, uids[:n], a); err != nil {
			return err
		}
		uids = uids[n:]
	}
	return nil
}

// takeBatch looks at the new mails uids, and answers with the replies to
// questions from allowed senders.
func (e *Email) takeBatch(ctx context.Context, c *imapclient.Client, uids []imap.UID, a Answers) error {
	// Anyone can mail the folder: the fields are read up to
	// maxHeaderRead each mail, so a batch costs at most maxBatch times
	// that, however long the lines a sender wrote.
	head := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: headerFields, Peek: true,
		Partial: &imap.SectionPartial{Size: maxHeaderRead}}
	msgs, err := c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{head}}).Collect()
	if err != nil {
		return fmt.Errorf("fetch headers: %w", err)
	}
	slices.SortFunc(msgs, func(a, b *imapclient.FetchMessageBuffer) int { return cmp.Compare(a.UID, b.UID) })
	for _, m := range msgs {
		e.lastUID = max(e.lastUID, m.UID)
		r, ok := e.match(m.FindBodySection(head))
		if !ok {
			continue
		}
		r.uid = m.UID
		if !e.allowed(r.from.Address) {
			e.log().Info("email: a reply from an address not in senders answers nothing", "from", r.addr())
			continue
		}
		if why := autoReply(r.h); why != "" {
			e.log().Info("email: an automatic reply answers nothing", "from", r.addr(), "id", r.q.id, "why", why)
			continue
		}
		if err := e.answer(ctx, c, m.RFC822Size > maxReplySize, r, a); err != nil {
			if errors.Is(err, errNotSaved) || errors.Is(err, errUnread) && e.readAgain(m.UID) {
				// Looked at again after the backoff, from this mail on.
				e.lastUID = m.UID - 1
			} else if errors.Is(err, errUnread) {
				e.log().Warn("email: a reply that cannot be read is passed over, left unread", "from", r.addr(), "id", r.q.id, "uid", m.UID, "err", e.redact(err))
			}
			return err
		}
	}
	return nil
}

// readAgain counts a look at the reply uid that could not read its
// text, and reports whether it is to be looked at again.
func (e *Email) readAgain(uid imap.UID) bool {
	if uid != e.unread {
		e.unread, e.unreadTries = uid, 0
	}
	e.unreadTries++
	return e.unreadTries < maxReadTries
}

// headerFields are the fields of a new mail read to tell whether it is a
// reply to a question: who sent it, to which mail, and whether a person
// wrote it (autoReply).
var headerFields = []string{"From", "Message-ID", "Subject", "In-Reply-To", "References",
	"Auto-Submitted", "X-Autoreply", "X-Autorespond", "Precedence", "Return-Path", "Content-Type"}

// inbound is a reply to a question of the channel's.
type inbound struct {
	q    emailQuestion
	qid  string // the question's Message-ID
	gone string // why it is no longer taken, when the question is settled
	from *mail.Address
	h    mail.Header
	uid  imap.UID
}

// addr is the sender's address, in lower case.
func (r *inbound) addr() string { return strings.ToLower(r.from.Address) }

// match finds the question a mail's header replies to, pending or
// settled lately.
func (e *Email) match(raw []byte) (*inbound, bool) {
	// A header cut at maxHeaderRead ends mid-line: the line is ended,
	// and the header (a cut field is read as far as it goes, or not).
	raw = slices.Concat(bytes.TrimRight(raw, "\r\n"), []byte("\r\n\r\n"))
	th, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return nil, false
	}
	h := mail.Header{Header: message.Header{Header: th}}
	irt, _ := h.MsgIDList("In-Reply-To")
	refs, _ := h.MsgIDList("References")
	from, err := h.AddressList("From")
	if err != nil || len(from) != 1 {
		return nil, false
	}
	ids := append(irt, refs...)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if q, ok := e.asks[id]; ok {
			return &inbound{q: q, qid: id, from: from[0], h: h}, true
		}
	}
	for _, id := range ids {
		if g, ok := e.gone[id]; ok {
			return &inbound{q: g.q, qid: id, gone: g.why, from: from[0], h: h}, true
		}
	}
	return nil, false
}

// autoReply says why a mail was written by a machine, not a person, or
// "": an out-of-office or vacation notice comes from the person's own
// address, in reply to the question's mail, and must not answer it
// (RFC 3834's Auto-Submitted, and the older marks mail programs still
// set); neither must a delivery report (RFC 3464) or the channel's own
// follow-up coming back to a shared mailbox (auto-generated).
func autoReply(h mail.Header) string {
	if v := strings.FieldsFunc(strings.ToLower(h.Get("Auto-Submitted")), func(r rune) bool {
		return r == ' ' || r == '\t' || r == ';' || r == '('
	}); len(v) > 0 && v[0] != "no" {
		return "Auto-Submitted: " + v[0]
	}
	for _, k := range []string{"X-Autoreply", "X-Autorespond"} {
		if h.Get(k) != "" {
			return k
		}
	}
	switch p := strings.ToLower(strings.TrimSpace(h.Get("Precedence"))); p {
	case "auto_reply", "bulk", "junk", "list":
		return "Precedence: " + p
	}
	if strings.TrimSpace(h.Get("Return-Path")) == "<>" {
		return "a bounce (Return-Path: <>)"
	}
	if t, _, _ := h.ContentType(); t == "multipart/report" {
		return "a delivery report"
	}
	return ""
}

// allowed: the address is one of the senders the config names.
func (e *Email) allowed(addr string) bool {
	senders := e.Senders
	if len(senders) == 0 {
		senders = e.To
	}
	for _, s := range senders {
		if a, err := mail.ParseAddress(s); err == nil && strings.EqualFold(a.Address, addr) {
			return true
		}
	}
	return false
}

// answer reads the reply r (its text part alone when it is large),
// answers its question with its text above the quote, and marks it
// \Seen (taken). A reply not taken (to a question settled, or one the
// question does not allow) is told so by mail, and marked \Seen too.
func (e *Email) answer(ctx context.Context, c *imapclient.Client, large bool, r *inbound, a Answers) error {
	read := e.readWhole
	if large {
		read = e.readTextPart
	}
	uid := r.uid
	text, err := read(c, uid)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnread, err)
	}
	from := r.addr()
	why, hint := r.gone, ""
	switch {
	case why != "":
	case text == "":
		why = "it has no text of its own above the quoted mail"
	default:
		// Answered first, marked read after: an answer the server cannot
		// save now stays unread, and is read again once the watch is back.
		switch err := a.Reply(r.q.token, r.q.kind, r.q.id, text, from, from, "email"); {
		case errors.Is(err, hub.ErrNotSaved) || errors.Is(err, hub.ErrUnreachable):
			return fmt.Errorf("%w: %w", errNotSaved, err)
		case errors.Is(err, hub.ErrNotAnOption):
			why, hint = err.Error(), "Reply again with one of them, as it is written, or answer in the app."
		case errors.Is(err, hub.ErrNotPending): // settled meanwhile
			why = e.goneOf(r.qid)
		case err != nil: // for good: tried again, it would stop the watch
			why = err.Error()
		}
	}
	if why != "" {
		e.log().Info("email: a reply not taken", "from", from, "id", r.q.id, "why", why)
		e.tellNotTaken(ctx, r, text, why, hint)
	}
	if err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
		return fmt.Errorf("mark a reply seen: %w", err)
	}
	return nil
}

// goneOf is why a reply to the question of Message-ID id, no longer
// pending, is not taken.
func (e *Email) goneOf(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if g, ok := e.gone[id]; ok {
		return g.why
	}
	return "the question is no longer waiting for an answer (answered elsewhere, withdrawn or timed out)"
}

// tellNotTaken mails the sender of r that it was not taken, and why, in
// its thread, quoting text (what they wrote). Once for each reply mail,
// and maxNotTakenMails a minute to a sender; marked auto-replied (RFC
// 3834), so that no mail program answers it, and this channel takes no
// mail so marked.
func (e *Email) tellNotTaken(ctx context.Context, r *inbound, text, why, hint string) {
	rid, _ := r.h.MessageID()
	key := rid
	if key == "" {
		key = fmt.Sprintf("uid %d/%d", e.uidValidity, r.uid)
	}
	e.mu.Lock()
	told := e.told[key]
	if !told {
		if e.told == nil {
			e.told = map[string]bool{}
		}
		if len(e.told) >= maxTracked {
			clear(e.told) // a reply looked at again after is told again, at worst
		}
		e.told[key] = true
	}
	e.mu.Unlock()
	if told {
		return
	}
	if ok, untold := e.notices.allow(r.addr(), maxNotTakenMails, time.Minute, e.clock()); !ok {
		e.log().Warn("email: too many replies not taken from one sender this minute; this one is not told by mail", "from", r.addr())
		return
	} else if untold > 0 {
		e.log().Info("email: replies not taken and not told by mail, as there were too many", "from", r.addr(), "untold", untold)
	}
	subject, _ := r.h.Subject()
	subject = Clip(strings.TrimSpace(subject), 200)
	if subject == "" {
		subject = cmp.Or(r.q.title, "[agentassistant]")
	}
	if l := strings.ToLower(subject); !strings.HasPrefix(l, "re:") {
		subject = "Re: " + subject
	}
	var body strings.Builder
	body.WriteString("Not taken: " + why + ".\r\n")
	if hint != "" {
		body.WriteString(hint + "\r\n")
	}
	if text != "" {
		body.WriteString("\r\nWhat you wrote, so that nothing is lost:\r\n\r\n")
		for l := range strings.SplitSeq(text, "\n") {
			body.WriteString("> " + strings.TrimRight(l, "\r") + "\r\n")
		}
	}
	refs := []string{r.qid}
	var irt []string
	if rid != "" {
		refs, irt = append(refs, rid), []string{rid}
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	err := e.send(ctx, outMail{to: []*mail.Address{r.from}, subject: subject, id: e.newID(), inReplyTo: irt, refs: refs,
		auto: "auto-replied", body: body.String()})
	if err != nil {
		e.log().Warn("email: cannot tell a sender their reply was not taken", "from", r.addr(), "err", err)
	}
}

// readWhole is the answer in the reply uid, fetched whole (it is at most
// maxReplySize).
func (e *Email) readWhole(c *imapclient.Client, uid imap.UID) (string, error) {
	whole := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{whole}}).Collect()
	if err != nil {
		return "", fmt.Errorf("fetch a reply: %w", err)
	}
	if len(msgs) != 1 {
		return "", nil // gone meanwhile
	}
	return replyText(msgs[0].FindBodySection(whole)), nil
}

// readTextPart is the answer in the reply uid, too large to fetch whole
// (a photo attached): its structure is read, then its first inline
// text/plain part alone (or else text/html), its MIME header and at most
// maxReplySize of its body.
func (e *Email) readTextPart(c *imapclient.Client, uid imap.UID) (string, error) {
	msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}}).Collect()
	if err != nil {
		return "", fmt.Errorf("fetch a reply's structure: %w", err)
	}
	if len(msgs) != 1 || msgs[0].BodyStructure == nil {
		return "", nil
	}
	var plain, markup []int
	msgs[0].BodyStructure.Walk(func(path []int, part imap.BodyStructure) bool {
		if len(path) > maxDepth {
			return false
		}
		single, ok := part.(*imap.BodyStructureSinglePart)
		if !ok {
			return true
		}
		if d := single.Disposition(); d != nil && strings.EqualFold(d.Value, "attachment") {
			return false
		}
		switch single.MediaType() {
		case "text/plain":
			if plain == nil {
				plain = slices.Clone(path)
			}
		case "text/html":
			if markup == nil {
				markup = slices.Clone(path)
			}
		}
		return false
	})
	path := plain
	if path == nil {
		path = markup
	}
	if path == nil {
		return "", nil
	}
	mime := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierMIME, Part: path, Peek: true}
	if _, single := msgs[0].BodyStructure.(*imap.BodyStructureSinglePart); single {
		// Not multipart: its part 1 is its body, described by the mail's
		// own header.
		mime = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true, Partial: &imap.SectionPartial{Size: maxHeaderRead}}
	}
	body := &imap.FetchItemBodySection{Part: path, Peek: true, Partial: &imap.SectionPartial{Size: maxReplySize}}
	msgs, err = c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{mime, body}}).Collect()
	if err != nil {
		return "", fmt.Errorf("fetch a reply's text: %w", err)
	}
	if len(msgs) != 1 {
		return "", nil
	}
	head := bytes.TrimRight(msgs[0].FindBodySection(mime), "\r\n")
	return replyText(slices.Concat(head, []byte("\r\n\r\n"), msgs[0].FindBodySection(body))), nil
}

// errNotSaved: a reply's answer could not be saved now; it is tried
// again.
var errNotSaved = errors.New("a reply's answer cannot be saved now")

// errUnread: a reply could not be read (the connection dropped between
// its header and its text); it is read again, not passed over.
var errUnread = errors.New("a reply cannot be read now")

// replyText is the answer a mail holds: its first text/plain part's
// lines above the quote, or its HTML's when it has no plain text (some
// mail programs send only HTML).
func replyText(raw []byte) string {
	ent, err := message.Read(bytes.NewReader(raw))
	if err != nil && !unknownCoding(err) {
		return ""
	}
	text, markup, _ := firstText(ent, 0)
	if text == "" && markup != "" {
		text = htmlText(markup)
	}
	return Clip(stripQuote(text), maxAnswer)
}

// maxDepth bounds the nesting of a mail's multiparts looked into.
const maxDepth = 8

// firstText is the body of e's first inline text/plain part (ok), or
// else of its first text/html part, looking into its multiparts
// (go-message's mail.Reader gives up on a part whose transfer encoding
// it does not know: this reads it as it is).
func firstText(e *message.Entity, depth int) (text, markup string, ok bool) {
	if mr := e.MultipartReader(); mr != nil {
		if depth >= maxDepth {
			return "", "", false
		}
		for {
			p, err := mr.NextPart()
			if err != nil && !unknownCoding(err) {
				return "", markup, false
			}
			t, h, ok := firstText(p, depth+1)
			if ok {
				return t, "", true
			}
			if markup == "" {
				markup = h
			}
		}
	}
	t, _, _ := e.Header.ContentType()
	if disp, _, _ := e.Header.ContentDisposition(); disp == "attachment" || t != "text/plain" && t != "text/html" {
		return "", "", false
	}
	b, _ := io.ReadAll(io.LimitReader(e.Body, maxReplySize))
	if t == "text/html" {
		return "", string(b), false
	}
	return string(b), "", true
}

// htmlQuote marks where a mail program's HTML reply quotes the mail it
// answers (Gmail, Apple Mail and Thunderbird, Outlook).
var htmlQuote = []string{`<blockquote`, `class="gmail_quote`, `id="divRplyFwdMsg"`, `id="appendonsend"`, `class="moz-cite-prefix"`}

// htmlDropped are the elements whose content is no text.
var htmlDropped = []string{"head", "style", "script", "title"}

// htmlBreaks are the tags that end a line.
var htmlBreaks = map[string]bool{"br": true, "/p": true, "/div": true, "/li": true, "/tr": true, "/h1": true, "/h2": true, "/h3": true, "p": true, "div": true, "hr": true}

// htmlText is what a person wrote in an HTML-only reply, above the quote:
// the tags dropped, the entities read, a line for each paragraph, div or
// break. It is no HTML parser, and needs none: its output is plain text
// shown as such.
func htmlText(s string) string {
	lower := strings.ToLower(s)
	for _, q := range htmlQuote {
		if i := strings.Index(lower, q); i >= 0 {
			if j := strings.LastIndexByte(lower[:i], '<'); j >= 0 {
				i = j
			}
			s, lower = s[:i], lower[:i]
		}
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s, lower = s[i:], lower[i:]
		end := strings.IndexByte(s, '>')
		if end < 0 {
			break
		}
		name := strings.FieldsFunc(lower[1:end], func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' })
		tag := ""
		if len(name) > 0 {
			tag = strings.TrimSuffix(name[0], "/")
		}
		s, lower = s[end+1:], lower[end+1:]
		if slices.Contains(htmlDropped, tag) {
			k := strings.Index(lower, "</"+tag)
			if k < 0 { // unclosed: the rest is its content (and each byte is looked at once)
				break
			}
			s, lower = s[k:], lower[k:]
			continue
		}
		if htmlBreaks[tag] {
			b.WriteByte('\n')
		}
	}
	lines := strings.Split(html.UnescapeString(b.String()), "\n")
	var out []string
	for _, l := range lines {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// unknownCoding: the error of a mail (or part) whose charset or transfer
// encoding go-message does not know; it still reads the bytes as they
// are, which beats losing what the person wrote.
func unknownCoding(err error) bool {
	return message.IsUnknownCharset(err) || message.IsUnknownEncoding(err)
}

// stripQuote keeps what was written above the quoted mail: it drops the
// lines quoted with ">", the "On … wrote:" line before them, an
// "Original Message" block and the signature after "-- ". A reply
// written below the quote keeps its own lines.
func stripQuote(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		t := strings.TrimRight(l, " \t")
		if l == "-- " || t == "--" || strings.HasPrefix(strings.TrimSpace(l), "-----Original Message-----") {
			lines = lines[:i]
			break
		}
	}
	above := lines
	for i, l := range lines {
		if strings.HasPrefix(l, ">") {
			above = lines[:i]
			break
		}
	}
	above = dropAttribution(above)
	if text := strings.TrimSpace(strings.Join(above, "\n")); text != "" {
		return text
	}
	var own []string // below the quote
	for _, l := range lines {
		if !strings.HasPrefix(l, ">") {
			own = append(own, l)
		}
	}
	own = dropAttribution(trimBlank(own))
	return strings.TrimSpace(strings.Join(own, "\n"))
}

// dropAttribution drops a trailing "On … wrote:" line (which a mail
// program may have wrapped over two).
func dropAttribution(lines []string) []string {
	lines = trimBlank(lines)
	n := len(lines)
	if n == 0 {
		return lines
	}
	last := strings.TrimSpace(lines[n-1])
	if !strings.HasSuffix(last, "wrote:") && (!strings.HasPrefix(last, "On ") || !strings.HasSuffix(last, ":")) {
		return lines
	}
	lines = lines[:n-1]
	if !strings.HasPrefix(last, "On ") && n >= 2 && strings.HasPrefix(strings.TrimSpace(lines[n-2]), "On ") {
		lines = lines[:n-2]
	}
	return trimBlank(lines)
}

// trimBlank drops the blank lines at the end.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
