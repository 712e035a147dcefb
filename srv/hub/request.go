package hub

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// A request's lifecycle: asked (saved, then shown), waited on by one or
// more callers, and settled once (answered, timed out, withdrawn), its
// outcome saved before anyone is told. Its timers: the deadline, and the
// orphan grace that starts when its last caller leaves.

// pending is a request waiting for its outcome.
type pending struct {
	req       Request
	sum       digest // of req, for callers that re-attach
	token     string
	createdAt time.Time
	deadline  time.Time
	done      chan struct{}
	reply     *Reply // set, with err and reason, before done is closed
	err       error
	reason    string      // why it was withdrawn or timed out (RequestCancelled)
	seq       uint64      // the event that delivered it; 0 when restored
	waiters   int         // Ask calls waiting on it now
	expiry    *time.Timer // fires at the deadline
	orphan    *time.Timer // fires OrphanGrace after the last waiter left
	notice    *time.Timer // fires OrphanNotice after the last waiter left
	// gone: the clients were told no agent waits for it. Read without
	// the room's lock when listing the pending requests.
	gone atomic.Bool
	// shown: saved, and announced to the clients. Until then no client
	// sees it, lists it or answers it.
	shown bool
	// settling: an outcome is being saved; other outcomes are refused
	// meanwhile (the first answer wins).
	settling bool
	// In cluster mode (shared.go): the revision of its record last
	// applied, and the instance that holds its agent's call.
	rev    uint64
	holder string
	// woken: its callers have the outcome (done is closed); in cluster
	// mode before the change is heard and it leaves the room's pending.
	woken bool
	// retry: the wait before the last try again of an outcome that
	// could not be saved (sharedlink.go).
	retry time.Duration
}

// Ask delivers req to every client of token and waits until one answers,
// the request times out (ErrTimeout) or is withdrawn (ErrWithdrawn), or
// ctx ends (ctx.Err()).
//
// Asking again with the ID of a pending request re-attaches to it instead
// of asking twice; with the ID of one settled within Retention, it returns
// that outcome. That is how an agent whose connection or server went away
// gets its answer after all. Only the same request re-attaches (same kind,
// project directory and text, under the same token): another one with
// that ID gets ErrDuplicate, never the answer to a question it did not ask.
//
// When the last caller waiting on a request goes away without cancelling
// (its connection dropped; the server cannot tell that from a cancel), the
// request stays pending, orphaned, for OrphanGrace, then is withdrawn.
// Cancel withdraws it at once.
func (h *Hub) Ask(ctx context.Context, token string, req Request) (*Reply, error) {
	select {
	case <-h.quit:
		return nil, ErrClosed
	default:
	}
	sum := req.digest() // outside the lock: the text may be long
	if h.shared != nil {
		return h.askShared(ctx, token, req, sum)
	}
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[req.ID]
	switch {
	case p != nil && p.sum != sum:
		r.mu.Unlock()
		return nil, ErrDuplicate
	case p != nil:
		p.waiters++
		stopTimer(&p.orphan)
		var send func()
		if back := h.backLocked(r, p); back != nil {
			send = r.fanLocked(back, "")
		}
		r.mu.Unlock()
		if send != nil {
			send()
		}
		h.log.Info("re-attached to a pending request", "kind", req.Kind, "id", req.ID)
	default:
		if s := r.settled[req.ID]; s != nil {
			if s.sum != sum {
				r.mu.Unlock()
				return nil, ErrDuplicate
			}
			if s.takenElsewhere {
				r.mu.Unlock()
				return nil, ErrHandedOver
			}
			h.handedOverLocked(r, req.ID)
			r.mu.Unlock()
			h.log.Info("re-attached to a settled request", "kind", req.Kind, "id", req.ID)
			return s.reply, s.err
		}
		if m := r.missed[req.ID]; m != nil {
			if m.p.sum != sum {
				r.mu.Unlock()
				return nil, ErrDuplicate
			}
			h.handedOverLocked(r, req.ID)
			r.mu.Unlock()
			h.log.Info("re-attached to an answer kept for its agent", "kind", req.Kind, "id", req.ID)
			return m.reply, nil
		}
		now := h.now()
		p = &pending{req: req, sum: sum, token: token, createdAt: now, deadline: now.Add(req.Timeout), done: make(chan struct{}), waiters: 1}
		r.pending[req.ID] = p
		saved := h.persist(r, p, store.Pending, nil, "")
		r.mu.Unlock()
		// Shown only once saved: a question on a screen survives a crash.
		err := wait(saved)
		took := h.now().Sub(now)
		if err != nil {
			return nil, h.refuse(r, p, err)
		}
		r.mu.Lock()
		if r.pending[req.ID] != p || p.settling { // withdrawn meanwhile
			r.mu.Unlock()
			break
		}
		p.shown = true
		h.arm(r, p)
		frame := r.emitLocked(requestFrame(p), h.now())
		p.seq = r.seq
		send := r.fanLocked(frame, "")
		r.mu.Unlock()
		send()
		h.emit(Event{Kind: Asked, Token: token, Request: req, AskedAt: now, At: now.Add(took), Saved: took})
		h.log.Debug("request pending", "kind", req.Kind, "id", req.ID, "timeout", req.Timeout)
	}

	select {
	case <-p.done:
		h.wokeHook()
		if ctx.Err() == nil {
			return p.reply, p.err
		}
		// Its outcome came as the call ended: nobody reads this reply.
		h.keepIfUnread(r, p)
		return nil, ctx.Err()
	case <-h.quit:
		return nil, ErrClosed
	case <-ctx.Done():
		h.wokeHook()
		// Withdrawn only when neither the leaving caller nor the one
		// that made it can come back for a missed answer.
		if h.detach(r, p, req.WithdrawOnLeave && p.req.WithdrawOnLeave) {
			h.withdrawLeft(r, p)
		}
		h.keepIfUnread(r, p)
		return nil, ctx.Err()
	}
}

// wait waits for a record to be saved; without a store there is nothing
// to wait for.
func wait(a *store.Ack) error {
	if a == nil {
		return nil
	}
	return a.Wait()
}

// refuse withdraws p, which could not be saved, before anyone saw it; its
// callers (the first one, and any that re-attached meanwhile) are told.
func (h *Hub) refuse(r *room, p *pending, err error) error {
	ns := &notSaved{what: "request", err: err}
	r.mu.Lock()
	if r.pending[p.req.ID] == p {
		delete(r.pending, p.req.ID)
		p.err = ns
		close(p.done)
	}
	r.mu.Unlock()
	h.log.Error("request refused: it cannot be saved", "kind", p.req.Kind, "id", p.req.ID, "err", err)
	return ns
}

// arm starts the deadline timer. Called with r.mu held.
func (h *Hub) arm(r *room, p *pending) {
	if p.req.Timeout > 0 {
		p.expiry = time.AfterFunc(p.deadline.Sub(h.now()), func() {
			if h.settle(r, p, nil, ErrTimeout, "timeout") == nil {
				h.log.Info("request timed out", "kind", p.req.Kind, "id", p.req.ID)
			}
		})
	}
}

// detach drops one waiter; the last one leaving orphans the request, or,
// when it cannot come back for the answer (leaving), reports that the
// request is to be withdrawn.
func (h *Hub) detach(r *room, p *pending, leaving bool) (withdraw bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[p.req.ID] != p {
		return false
	}
	p.waiters--
	if p.waiters > 0 {
		return false
	}
	if leaving {
		return true
	}
	h.orphanLocked(r, p)
	return false
}

func (h *Hub) orphanLocked(r *room, p *pending) {
	stopTimer(&p.orphan)
	h.noticeLocked(r, p)
	p.orphan = time.AfterFunc(h.grace, func() {
		r.mu.Lock()
		alone := r.pending[p.req.ID] == p && p.waiters <= 0
		r.mu.Unlock()
		if alone && h.settle(r, p, nil, ErrWithdrawn, NoteAbandoned) == nil {
			h.log.Info("orphaned request withdrawn", "kind", p.req.Kind, "id", p.req.ID, "after", h.grace)
		}
	})
}

// overLocked reports whether p has its outcome (reply, err, reason).
// Called with its room's lock held, under which they are set.
func (p *pending) overLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// settle ends p with its outcome, tells the clients and keeps the outcome
// for callers that re-attach. It returns ErrNotPending when p was already
// settled. The outcome is saved before anyone hears of it: the agent's
// reply and the other clients' notification wait for the store. An answer
// that cannot be saved is not taken (a notSaved error; the request stays
// pending, answerable again); a timeout or withdrawal is told all the same
// (the agent's call ends either way; a restart brings the request back,
// where it times out or is withdrawn again).
func (h *Hub) settle(r *room, p *pending, rep *Reply, err error, reason string) error {
	select {
	case <-h.quit:
		return ErrNotPending // shutting down: the request stays pending in the store
	default:
	}
	if h.shared != nil {
		if !h.own("outcome of a request", p.req.ID) {
			return ErrNotPending
		}
		defer h.writes.Done()
		return h.settleShared(r, p, rep, err, reason)
	}
	r.mu.Lock()
	if r.pending[p.req.ID] != p || p.settling {
		r.mu.Unlock()
		return ErrNotPending
	}
	p.settling = true
	status := statusOf(err)
	if rep != nil && p.waiters <= 0 {
		reason = NoteUndelivered // no agent waits for this answer
	}
	saved := h.persist(r, p, status, rep, reason)
	r.mu.Unlock()
	start := h.now()
	serr := wait(saved)
	took := h.now().Sub(start)
	r.mu.Lock()
	if serr != nil && rep != nil {
		p.settling = false
		// Its timers may have fired meanwhile, and found it settling.
		stopTimer(&p.expiry)
		h.arm(r, p)
		if p.waiters <= 0 {
			h.orphanLocked(r, p)
		}
		r.mu.Unlock()
		h.log.Error("answer refused: it cannot be saved", "kind", p.req.Kind, "id", p.req.ID, "err", serr)
		return &notSaved{what: "answer", err: serr}
	}
	if serr != nil {
		h.log.Error("outcome not saved: after a restart the request is pending again", "kind", p.req.Kind, "id", p.req.ID, "reason", reason, "err", serr)
	}
	delete(r.pending, p.req.ID)
	stopTimer(&p.expiry)
	stopTimer(&p.orphan)
	stopTimer(&p.notice)
	p.reply, p.err, p.reason = rep, err, reason
	close(p.done)
	now := h.now()
	r.keepSettled(p.req.ID, &settled{sum: p.sum, kind: p.req.Kind, reply: rep, err: err, reason: reason, at: now}, now.Add(-h.retention))
	if reason == NoteUndelivered {
		// No agent waited for this answer: keep it for the next call. One
		// that re-attached while it was saved has it now.
		h.keepMissedLocked(r, p, rep, now)
		if p.waiters > 0 {
			h.handedOverLocked(r, p.req.ID)
		}
	}
	if !p.shown {
		r.mu.Unlock()
		return nil
	}
	defer h.emitOutcome(p, rep, err, reason, now, took)
	except := ""
	var frame [][]byte
	if rep != nil {
		frame, except = r.emitLocked(replyNotificationFrame(p, rep), now), rep.ClientID
	} else {
		frame = r.emitLocked(cancelledFrame(p, reason), now)
	}
	send := r.fanLaterLocked(frame, except)
	r.mu.Unlock()
	send()
	return nil
}

// Answer records a reply to the request id of the given kind. The first
// answer wins; the other clients of the room get a reply notification once
// it is saved. An answer that cannot be saved is refused (ErrNotSaved) and
// the request stays pending.
func (h *Hub) Answer(token string, kind wire.Kind, id string, rep Reply) error {
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[id]
	shown := p != nil && p.shown
	r.mu.Unlock()
	if !shown || p.req.Kind != kind {
		return ErrNotPending
	}
	return h.settle(r, p, &rep, nil, "")
}

// Cancel withdraws a pending request of token at the agent's wish.
func (h *Hub) Cancel(token, id string) error {
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[id]
	r.mu.Unlock()
	if p == nil {
		return ErrNotPending
	}
	if err := h.settle(r, p, nil, ErrWithdrawn, "cancelled"); err != nil {
		return err
	}
	h.log.Info("request cancelled by the agent", "kind", p.req.Kind, "id", id)
	return nil
}

// digest identifies a request's content, so a caller re-attaching by ID
// can be told from another request that reuses the ID.
type digest [sha256.Size]byte

func (q *Request) digest() digest {
	h := sha256.New()
	var n [8]byte
	for _, f := range []string{q.Kind.String(), q.ProjectDirectory, q.Text} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var d digest
	h.Sum(d[:0])
	return d
}

// statusOf is the store's status of a request settled with err (nil:
// answered); sharedapply.go's settledOf reads it back.
func statusOf(err error) string {
	switch {
	case errors.Is(err, ErrTimeout):
		return store.TimedOut
	case err != nil:
		return store.Cancelled
	}
	return store.Answered
}
