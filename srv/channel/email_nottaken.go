package channel

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-message/mail"
)

// goneOf is why a reply to the question of Message-ID id, no longer
// pending, is not taken.
func (e *Email) goneOf(ctx context.Context, id string) string {
	if q, ok, err := getAsked(ctx, e.notesOf(), e.noteKey(id)); err == nil && ok && q.Gone != "" {
		return q.Gone
	}
	return "the question is no longer waiting for an answer (answered elsewhere, withdrawn or timed out)"
}

// tellNotTaken mails the sender of r that it was not taken, and why, in
// its thread, quoting text (what they wrote). Once for each reply mail
// (across a cluster too), and maxNotTakenMails a minute to a sender; marked auto-replied (RFC
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
	// Once across the cluster too: a reply left unread by an instance
	// that died is read again by the next to watch the mailbox.
	toldKey := e.lead() + ".reply." + key
	tell, finish := tellOnce(ctx, e.notesOf(), e.log(), toldKey)
	if !tell {
		return
	}
	if ok, untold := e.notices.allow(r.addr(), maxNotTakenMails, time.Minute, e.clock()); !ok {
		e.log().Warn("email: too many replies not taken from one sender this minute; this one is not told by mail", "from", r.addr())
		finish(true) // by no instance
		return
	} else if untold > 0 {
		e.log().Info("email: replies not taken and not told by mail, as there were too many", "from", r.addr(), "untold", untold)
	}
	subject, _ := r.h.Subject()
	subject = Clip(strings.TrimSpace(subject), 200)
	if subject == "" {
		subject = cmp.Or(r.q.Title, "[agentassistant]")
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
	finish(err == nil)
}
