package channel

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Listen watches the mailbox for replies until ctx ends, logging in again
// with backoff when the server goes away.
func (e *Email) Listen(ctx context.Context, a Answers) {
	if e.IMAPAddr == "" {
		return
	}
	first := e.Backoff
	opt.Default(&first, time.Second)
	wait := first
	// refused is the wait while the login is refused, 0 while it is not.
	refused := time.Duration(0)
	for {
		watched, err := e.watch(ctx, a)
		if ctx.Err() != nil {
			return
		}
		if re := refusedOf(err); re != nil {
			// Not tried again within a minute, nor told at each try: a
			// person must fix the login (refused.go).
			if !awaitRefused(ctx, &refused, e.refused(e.Logger).refused(e, re)) {
				return
			}
			continue
		}
		refused = 0
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
	news := owned.NewWake()
	opts := &imapclient.Options{TLSConfig: e.tlsConfig(e.IMAPAddr), UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				news.Tell()
			}
		},
	}}
	conn, err := e.connect(ctx, e.IMAPAddr)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	c, err := e.imapClient(conn, opts)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = c.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if err := c.Login(e.IMAPUser, e.IMAPPassword).Wait(); err != nil {
		if re := e.imapRefusal(err); re != nil {
			return false, re
		}
		return false, fmt.Errorf("log in: %w", err)
	}
	e.refused(e.Logger).accepted(e, emailIMAPLogin)
	box := e.mailbox()
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

// imapClient speaks IMAP on conn as the TLS setting says: in the clear,
// in TLS from the first byte, or after STARTTLS (the library closes conn
// when that fails).
func (e *Email) imapClient(conn net.Conn, opts *imapclient.Options) (*imapclient.Client, error) {
	switch e.TLS {
	case "none":
		return imapclient.New(conn, opts), nil
	case "tls":
		cfg := opts.TLSConfig.Clone()
		cfg.NextProtos = []string{"imap"}
		return imapclient.New(tls.Client(conn, cfg), opts), nil
	default:
		return imapclient.NewStartTLS(conn, opts)
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
		r, ok, err := e.match(ctx, m.FindBodySection(head))
		if err != nil {
			// Looked at again after the backoff, from this mail on.
			return fmt.Errorf("%w: %w", errNotSaved, err)
		}
		e.lastUID = max(e.lastUID, m.UID)
		if !ok {
			continue
		}
		r.uid = m.UID
		if !e.allowed(r.from.Address) {
			e.log().Info("email: a reply from an address not in senders answers nothing", "from", r.addr())
			continue
		}
		if why := autoReply(r.h); why != "" {
			e.log().Info("email: an automatic reply answers nothing", "from", r.addr(), "id", r.q.ID, "why", why)
			continue
		}
		if err := e.answer(ctx, c, m.RFC822Size > maxReplySize, r, a); err != nil {
			if errors.Is(err, errNotSaved) || errors.Is(err, errUnread) && e.readAgain(m.UID) {
				// Looked at again after the backoff, from this mail on.
				e.lastUID = m.UID - 1
			} else if errors.Is(err, errUnread) {
				e.log().Warn("email: a reply that cannot be read is passed over, left unread", "from", r.addr(), "id", r.q.ID, "uid", m.UID, "err", e.redact(err))
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
	q    asked
	qid  string // the question's Message-ID
	gone string // why it is no longer taken, when the question is settled
	from *mail.Address
	h    mail.Header
	uid  imap.UID
}

// addr is the sender's address, in lower case.
func (r *inbound) addr() string { return strings.ToLower(r.from.Address) }

// maxLookups bounds the Message-IDs of a mail looked up as questions:
// a mail may list thousands in its References.
const maxLookups = 16

// match finds the question a mail's header replies to, pending or
// settled lately.
func (e *Email) match(ctx context.Context, raw []byte) (*inbound, bool, error) {
	h, from, ok := readReply(raw)
	if !ok {
		return nil, false, nil // unreadable, or from no one address: no reply of ours
	}
	irt, _ := h.MsgIDList("In-Reply-To")
	refs, _ := h.MsgIDList("References")
	// The mail it answers, then the thread's root and its latest: a
	// reply to a question, or to its follow-up, names the question there.
	ids := irt
	if len(refs) > 0 {
		ids = append(ids, refs[0])
		for _, id := range slices.Backward(refs) {
			ids = append(ids, id)
		}
	}
	var pending, gone *inbound
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || id == "" {
			continue
		}
		if len(seen) == maxLookups {
			break
		}
		seen[id] = true
		q, ok, err := getAsked(ctx, e.notesOf(), e.noteKey(id))
		switch {
		case err != nil:
			return nil, false, err
		case !ok:
		case q.Gone == "" && pending == nil:
			pending = &inbound{q: q, qid: id, from: from, h: h}
		case q.Gone != "" && gone == nil:
			gone = &inbound{q: q, qid: id, gone: q.Gone, from: from, h: h}
		}
	}
	if pending != nil {
		return pending, true, nil
	}
	return gone, gone != nil, nil
}

// readReply reads a mail's header and its one sender; ok is false when
// it cannot be read or names no single sender. A header cut at
// maxHeaderRead ends mid-line: the line is ended, and the header read (a
// cut field as far as it goes, or not).
func readReply(raw []byte) (h mail.Header, from *mail.Address, ok bool) {
	raw = slices.Concat(bytes.TrimRight(raw, "\r\n"), []byte("\r\n\r\n"))
	th, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return h, nil, false
	}
	h = mail.Header{Header: message.Header{Header: th}}
	list, err := h.AddressList("From")
	if err != nil || len(list) != 1 {
		return h, nil, false
	}
	return h, list[0], true
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
	text, imgs, err := read(c, uid)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnread, err)
	}
	from := r.addr()
	why, hint := r.gone, ""
	// A reply naming several options of a question taking several
	// answers with them, one text each (multi.go); its images after.
	typed := typedContents(r.q.Labels, r.q.Multi, true, text)
	if text == "" {
		typed = nil
	}
	contents := imgs.with(typed)
	switch {
	case why != "" && len(contents) > 0 && (a.tookAlready(r.q, "email:"+from, contents) || len(typed) > 0 && a.tookAlready(r.q, "email:"+from, typed)):
		// This very reply, taken before (read again after the watch
		// moved, its reader gone before it marked it read): it answered.
		why = ""
	case why != "":
	case text == "" && len(imgs.got) == 0:
		why = "it has no text of its own above the quoted mail"
		if l := imgs.left(); l != "" {
			why += ", and no image an answer takes (" + l + ")"
		}
	default:
		// Answered first, marked read after: an answer the server cannot
		// save now stays unread, and is read again once the watch is back.
		token, ok := a.token(r.q.Room)
		if !ok {
			why = "the question is not one this server asks any more"
			break
		}
		err := a.ReplyWith(ctx, token, r.q.Kind, r.q.ID, contents, from, from, "email")
		if errors.Is(err, hub.ErrNotAnOption) && len(typed) > 0 && len(contents) > len(typed) {
			// A question that takes only its options takes no image:
			// the option named answers, without them.
			if err = a.ReplyWith(ctx, token, r.q.Kind, r.q.ID, typed, from, from, "email"); err == nil {
				e.log().Info("email: a reply's files left out: its question takes only its options", "from", from, "id", r.q.ID)
			}
			contents = typed
		}
		switch {
		case err == nil:
		case errors.Is(err, hub.ErrTooLarge): // now and later alike
			e.log().Warn("email: a reply's answer is too large to save", "from", from, "id", r.q.ID, "err", e.redact(err))
			why = tooLarge
		case errors.Is(err, hub.ErrNotSaved) || errors.Is(err, hub.ErrUnreachable):
			return fmt.Errorf("%w: %w", errNotSaved, err)
		case errors.Is(err, hub.ErrNotAnOption):
			why, hint = err.Error(), "Reply again with one of them, as it is written, or answer in the app."
			if r.q.Multi {
				hint = "Reply again with one or more of them, by their numbers or as they are written, or answer in the app."
			}
		case a.tookAlready(r.q, "email:"+from, contents):
			// This very reply, taken before (read again after the
			// watch moved, or before it was marked read): it answered.
		case errors.Is(err, hub.ErrNotPending): // settled meanwhile
			why = e.goneOf(ctx, r.qid)
		default: // for good: tried again, it would stop the watch
			why = err.Error()
		}
	}
	if why != "" {
		e.log().Info("email: a reply not taken", "from", from, "id", r.q.ID, "why", why)
		e.tellNotTaken(ctx, r, text, why, hint)
	}
	if err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
		return fmt.Errorf("mark a reply seen: %w", err)
	}
	return nil
}

// readWhole is the answer in the reply uid, fetched whole (it is at most
// maxReplySize): its text and images.
func (e *Email) readWhole(c *imapclient.Client, uid imap.UID) (string, *replyImages, error) {
	whole := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{whole}}).Collect()
	if err != nil {
		return "", nil, fmt.Errorf("fetch a reply: %w", err)
	}
	if len(msgs) != 1 {
		return "", &replyImages{}, nil // gone meanwhile
	}
	text, imgs := readMail(msgs[0].FindBodySection(whole))
	return text, imgs, nil
}

// readTextPart is the answer in the reply uid, too large to fetch whole
// (a photo attached): its structure is read, then its first inline
// text/plain part (or else text/html; the HTML too when a file may be
// one it shows), each its MIME header and at most maxReplySize of its
// body, and the files that say they are images (or say nothing:
// application/octet-stream), as many as the bounds take by their size.
func (e *Email) readTextPart(c *imapclient.Client, uid imap.UID) (string, *replyImages, error) {
	msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}}).Collect()
	if err != nil {
		return "", nil, fmt.Errorf("fetch a reply's structure: %w", err)
	}
	imgs := &replyImages{}
	if len(msgs) != 1 || msgs[0].BodyStructure == nil {
		return "", imgs, nil
	}
	var plain, markup []int
	var files [][]int
	cids := false
	guess := 0 // the bytes of the files fetched, decoded
	msgs[0].BodyStructure.Walk(func(path []int, part imap.BodyStructure) bool {
		if len(path) > maxDepth {
			return false
		}
		single, ok := part.(*imap.BodyStructureSinglePart)
		if !ok {
			return !strings.HasPrefix(part.MediaType(), "message/")
		}
		attached := single.Disposition() != nil && strings.EqualFold(single.Disposition().Value, "attachment")
		switch t := single.MediaType(); {
		case strings.HasPrefix(t, "message/"):
		case !attached && t == "text/plain":
			if plain == nil {
				plain = slices.Clone(path)
			}
		case !attached && t == "text/html":
			if markup == nil {
				markup = slices.Clone(path)
			}
		case strings.HasPrefix(t, "image/") || t == "application/octet-stream":
			if size := int(single.Size) / 4 * 3; imgs.fits(guess + size) {
				files, guess = append(files, slices.Clone(path)), guess+size
				cids = cids || single.ID != ""
			}
		case attached || !strings.HasPrefix(t, "text/"):
			imgs.files++
		}
		return false
	})
	if len(files) > maxReplyImages {
		imgs.over += len(files) - maxReplyImages
		files = files[:maxReplyImages]
	}
	var parts [][]int
	if plain != nil {
		parts = append(parts, plain)
	}
	if markup != nil && (plain == nil || cids) {
		parts = append(parts, markup)
	}
	parts = append(parts, files...)
	_, single := msgs[0].BodyStructure.(*imap.BodyStructureSinglePart)
	var sections []*imap.FetchItemBodySection
	for i, path := range parts {
		mime := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierMIME, Part: path, Peek: true}
		if single {
			// Not multipart: its part 1 is its body, described by the mail's
			// own header.
			mime = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true, Partial: &imap.SectionPartial{Size: maxHeaderRead}}
		}
		limit := int64(maxReplySize)
		if i >= len(parts)-len(files) {
			limit = maxReplyImageBytes/3*4 + maxReplyImageBytes/38 + 64 // base64, its lines of 76
		}
		sections = append(sections, mime, &imap.FetchItemBodySection{Part: path, Peek: true, Partial: &imap.SectionPartial{Size: limit}})
	}
	if len(sections) == 0 {
		return "", imgs, nil
	}
	msgs, err = c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: sections}).Collect()
	if err != nil {
		return "", nil, fmt.Errorf("fetch a reply's text: %w", err)
	}
	if len(msgs) != 1 {
		return "", imgs, nil
	}
	var m mailParts
	for i := 0; i < len(sections); i += 2 {
		head := bytes.TrimRight(msgs[0].FindBodySection(sections[i]), "\r\n")
		ent, err := message.Read(bytes.NewReader(slices.Concat(head, []byte("\r\n\r\n"), msgs[0].FindBodySection(sections[i+1]))))
		if err == nil || unknownCoding(err) {
			m.walk(ent, maxDepth)
		}
	}
	read := m.images()
	read.over += imgs.over
	read.files += imgs.files
	return m.answer(), read, nil
}

// errNotSaved: a reply's answer could not be saved now; it is tried
// again.
var errNotSaved = errors.New("a reply's answer cannot be saved now")

// errUnread: a reply could not be read (the connection dropped between
// its header and its text); it is read again, not passed over.
var errUnread = errors.New("a reply cannot be read now")
