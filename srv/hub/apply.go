package hub

import (
	"bytes"
	"slices"

	"github.com/agentassistant/agentassistant/srv/store"
)

// What every instance does on hearing a change of a shared record: a
// pending one shown and its deadline armed, a settled one ending the
// request here (records.go has what an instance writes).

// Apply is a change of a shared record heard from the cluster, in the
// order the changes were made: token is the record's room.
func (h *Hub) Apply(token string, rec SharedRecord, rev uint64) {
	h.apply(token, rec, rev)()
}

// apply is Apply, but for the frames it makes: it returns the function
// that sends them, in their turn (fan.go), which the caller calls.
func (h *Hub) apply(token string, rec SharedRecord, rev uint64) (send func()) {
	defer h.seqs.heardRev(rev)
	r := h.room(token)
	r.mu.Lock()
	if rec.Status == store.Pending {
		_, send := h.mirrorLocked(r, token, rec, rev)
		r.mu.Unlock()
		return send
	}
	p := r.pending[rec.ID]
	if p == nil {
		h.applySettledLocked(r, token, rec)
		r.mu.Unlock()
		return func() {}
	}
	r.mu.Unlock()
	return h.finish(r, p, rec, rev)
}

// Forget is the deletion of the record of id in token's room, heard at
// revision rev: a cleared history, or a record past its age. Only a
// settled record is deleted, so a request still pending here was
// settled while this instance did not hear it (its watch went on from
// a later revision, after a reconnect, and a key keeps one revision):
// it ends here, its outcome no longer known, as no longer pending. The
// record being written here is left alone: its create finds out.
func (h *Hub) Forget(token, id string, rev uint64) {
	defer h.seqs.heardRev(rev)
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[id]
	if p == nil || p.creating != nil {
		r.mu.Unlock()
		return
	}
	gone := SharedRecord{Record: h.record(r, p, store.Cancelled, nil, ReasonNoLongerPending), Holder: p.holder}
	r.mu.Unlock()
	h.finish(r, p, gone, rev)()
	h.log.Warn("a request's record was deleted before this instance heard how it ended; it ends here as no longer pending", "kind", p.req.Kind, "id", id)
}

// registerLocked makes sure r has a pending entry for the pending record
// rec, which this instance wrote or read, to wait on; it is shown when its
// creation is heard (Apply). It returns nil when the request is settled
// here already. Called with r.mu held.
func (h *Hub) registerLocked(r *room, token string, rec SharedRecord) *pending {
	p := r.pending[rec.ID]
	if p != nil && p.creating != nil && (p.holder != rec.Holder || !p.createdAt.Equal(rec.CreatedAt)) {
		// Another instance's record of that ID, heard while this one
		// writes its own, which will find it there: this one is shown.
		p = nil
	}
	if p == nil {
		if r.settled[rec.ID] != nil {
			return nil
		}
		p = pendingFrom(token, rec)
		r.pending[rec.ID] = p
	}
	return p
}

// pendingFrom is the request of rec, a record read or heard, in token's room.
func pendingFrom(token string, rec SharedRecord) *pending {
	req := requestOf(rec.Record)
	return &pending{req: req, sum: req.Digest(), token: token, createdAt: rec.CreatedAt, deadline: rec.Deadline, done: make(chan struct{}), holder: rec.Holder}
}

// mirrorLocked brings the pending record rec (at revision rev), heard
// from the cluster, into r: a request this instance has not shown is shown
// to its clients and its deadline armed; one it has takes the record's
// holder and agent-gone mark. Its notes are the event numbered rev. It
// returns nil when the request is settled here already, and the function
// that sends the notes it made. Called with r.mu held; send once it is
// released.
func (h *Hub) mirrorLocked(r *room, token string, rec SharedRecord, rev uint64) (*pending, func()) {
	p := h.registerLocked(r, token, rec)
	if p == nil {
		return nil, func() {}
	}
	if rev < p.rev {
		return p, func() {} // an older revision, read before the one applied
	}
	p.rev = rev
	p.holder = rec.Holder
	// Held here with no caller here: a request whose agent was told it
	// could not be saved, landing after all, is withdrawn unseen; any
	// other (heard after a restart) is orphaned like one whose caller
	// left, so its agent has the grace to come back, unless its caller
	// takes no missed answers: that one is withdrawn.
	lone := !p.shown && p.holder == h.self && p.waiters <= 0 && r.asking[rec.ID] == 0
	if lone && r.takeRefusedLocked(rec.ID) {
		return p, func() {
			h.goWrite("withdrawal of a request refused as not saved", p.req.ID, func() { _ = h.settle(r, p, nil, ErrWithdrawn, ReasonNotSaved) })
		}
	}
	if lone && p.req.WithdrawOnLeave {
		// Its caller takes no missed answers and is not here: withdrawn,
		// as on a single server's restart (Restore).
		return p, func() {
			h.goWrite("withdrawal of a request whose caller left", p.req.ID, func() { _ = h.settle(r, p, nil, ErrWithdrawn, ReasonAbandoned) })
		}
	}
	if lone {
		h.orphanLocked(r, p)
	}
	var ns []*Note
	if !p.shown && !p.settling { // not when withdrawn as it was saved
		p.shown = true
		h.arm(r, p)
		ns = append(ns, requestNote(NoteAsked, p))
		p.seq = rev
	}
	if rec.Gone != p.gone.Load() {
		p.gone.Store(rec.Gone)
		ns = append(ns, &Note{Kind: NoteAgent, Token: p.token, Request: p.req, Gone: rec.Gone})
	}
	if len(ns) > 0 {
		r.emitAtLocked(ns, rev, h.now())
	}
	if p.holder != h.self {
		// Another instance holds the call: its timers decide.
		stopTimer(&p.orphan)
		stopTimer(&p.notice)
	}
	if len(ns) == 0 {
		return p, func() {}
	}
	return p, r.fanLocked(ns, "")
}

// finish ends p with the settled record rec, heard at revision rev:
// its callers here are woken (unless they were), the outcome kept for
// re-attaching callers. It returns the function that tells the clients
// (the event numbered rev).
func (h *Hub) finish(r *room, p *pending, rec SharedRecord, rev uint64) (send func()) {
	s := rec.outcome()
	s.sum, s.kind, s.questions = p.sum, p.req.Kind, p.req.Questions
	r.mu.Lock()
	if r.pending[p.req.ID] != p {
		r.mu.Unlock()
		return func() {}
	}
	delete(r.pending, p.req.ID)
	stopTimer(&p.expiry)
	stopTimer(&p.orphan)
	stopTimer(&p.notice)
	if p.settling {
		p.heard = &settled{reply: s.reply, err: s.err, reason: rec.ClosedNote} // settle wakes the callers
	} else {
		h.wakeLocked(p, s, rec.ClosedNote)
	}
	now := h.now()
	if p.unsure != nil && sameOutcome(*p.unsure, rec.Record) {
		// This instance's own outcome, whose save went unconfirmed:
		// told now, as it would have been then.
		p.unsure = nil
		defer h.emitOutcome(p, s.reply, s.err, rec.ClosedNote, now, 0)
	}
	s.delivered = s.reply != nil && p.waiters > 0
	h.keepSettledLocked(r, p.req.ID, s, now.Add(-h.retention))
	h.sweepLaterLocked(r)
	switch {
	case rec.ClosedNote == ReasonUndelivered: // kept on every instance (missed.go)
		h.keepMissedLocked(r, p, s.reply, rec.ClosedAt, s.bytes)
		if p.waiters > 0 {
			// A caller came back here while it was written: it has it.
			h.handedOverLocked(r, p.req.ID)
			h.handOverLater(r, p.req.ID)
		}
	case h.unheardLocked(r, p, rec):
		h.goWrite("mark of an answer no agent had", p.req.ID, func() { h.keepUnheard(r, p.req.ID) })
	}
	if !p.shown {
		r.mu.Unlock()
		return func() {}
	}
	n, except := requestNote(NoteClosed, p), ""
	n.Reason = rec.ClosedNote
	if s.reply != nil {
		n.Kind, n.Reply, n.Reason, except = NoteAnswered, s.reply, "", s.reply.ClientID
	}
	send = r.fanLaterLocked(r.emitAtLocked([]*Note{n}, rev, now), except)
	r.mu.Unlock()
	return send
}

// sameOutcome: the settled records a and b hold the same outcome, written
// at the same time.
func sameOutcome(a, b store.Record) bool {
	return a.Status == b.Status && a.ClosedAt.Equal(b.ClosedAt) && a.ClosedNote == b.ClosedNote && bytes.Equal(a.Reply, b.Reply)
}

// settledOf is the outcome a settled record keeps.
func settledOf(rec store.Record) *settled {
	req := requestOf(rec)
	s := outcomeOf(rec)
	s.sum, s.kind, s.questions = req.Digest(), req.Kind, req.Questions
	return s
}

// outcomeOf is settledOf without the request (its digest and kind).
func outcomeOf(rec store.Record) *settled {
	s := &settled{at: rec.ClosedAt, bytes: rec.Bytes()}
	switch rec.Status {
	case store.Answered:
		s.reply = replyOf(rec)
	case store.TimedOut:
		s.err, s.reason = ErrTimeout, rec.ClosedNote
	default:
		s.err, s.reason = ErrWithdrawn, rec.ClosedNote
	}
	return s
}

// maxRefused bounds a room's refused IDs.
const maxRefused = 256

func (r *room) noteRefusedLocked(id string) {
	if len(r.refused) >= maxRefused {
		r.refused = r.refused[1:]
	}
	r.refused = append(r.refused, id)
}

// takeRefusedLocked reports whether id was refused, and forgets it.
func (r *room) takeRefusedLocked(id string) bool {
	i := slices.Index(r.refused, id)
	if i < 0 {
		return false
	}
	r.refused = slices.Delete(r.refused, i, i+1)
	return true
}

// askingLocked counts an ask of id in flight here (+1) or done (-1).
func (r *room) askingLocked(id string, d int) {
	if r.asking == nil {
		r.asking = make(map[string]int)
	}
	if r.asking[id] += d; r.asking[id] <= 0 {
		delete(r.asking, id)
	}
}
