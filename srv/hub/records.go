package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/srv/store"
)

// The request lifecycle, over the records of a Shared store: a cluster's,
// where several instances of the server share their requests (srv/cluster:
// a JetStream key-value bucket), or this process's own (local.go: the
// embedded store), which is a cluster of one.
//
// The records live in the Shared store, one per request, each change a
// new revision. Every instance
// hears every change, in order, and applies it (Apply): a record created
// pending is shown to the instance's clients and its deadline armed; a
// record settled ends the request there, wakes the callers waiting
// there and tells the clients. Changes are made by compare-and-set on the
// revision: of two answers given at once on two instances exactly one is
// written; the other finds the record settled and gets ErrNotPending, as
// the second of two answers on one instance does. A deadline is armed on
// every instance and fires on each, but only one timeout is written.
//
// The instance through which an agent's call last came (its Holder) owns
// what depends on the call's presence: the agent-gone notice (a change of
// the record, so every instance shows it) and the withdrawal after
// OrphanGrace. An agent that re-attaches through another instance makes
// that one the holder, so the first one's timers stand down.
//
// A server that runs alone is the one instance: it holds every call, and
// hears each change as soon as it is saved (local.go).

// SharedRecord is a request's record in a cluster: the store's record,
// who holds its agent's call, and whether the clients were told no agent
// waits for it.
type SharedRecord struct {
	store.Record
	Holder string `json:"holder,omitempty"`
	Gone   bool   `json:"gone,omitempty"`
	// Taken: an answer kept for an absent agent was handed to another
	// call of its project (TakeMissed; missed.go).
	Taken bool `json:"taken,omitempty"`
	// reply is the answer as its Reply decodes, when this process wrote
	// it: the local records apply it without decoding it again
	// (SharedRecord.outcome). Never sent.
	reply *Reply
}

// Shared keeps a cluster's request records. Its errors other than
// ErrRecordExists, ErrRecordChanged and ErrRecordMissing mean the record
// could not be read or written; those that wrap ErrUnreachable, that NATS
// is away for now.
type Shared interface {
	// Create saves a new record and returns its revision, or
	// ErrRecordExists when the room already has a record of that ID.
	Create(ctx context.Context, rec SharedRecord) (uint64, error)
	// Get returns the record of id in room and its revision, or
	// ErrRecordMissing when there is none.
	Get(ctx context.Context, room, id string) (SharedRecord, uint64, error)
	// Update replaces the record if its revision is still rev, and returns
	// the new revision; ErrRecordChanged when it is not.
	Update(ctx context.Context, rec SharedRecord, rev uint64) (uint64, error)
	// Epoch names the revisions' numbering: the same on every instance,
	// another when the records start again from scratch (seq.go).
	Epoch() string
}

// Errors of a Shared store.
var (
	ErrRecordExists  = errors.New("a record of this request exists")
	ErrRecordChanged = errors.New("the record changed since it was read")
	ErrRecordMissing = errors.New("no record of this request")
)

// sharedTimeout bounds one call to the shared store.
const sharedTimeout = 10 * time.Second

// askDigested is Ask, given the digest of req.
func (h *Hub) askDigested(ctx context.Context, token string, req Request, sum digest) (*Reply, error) {
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[req.ID]
	if p != nil && p.creating != nil {
		// Its record is being written, by another call here: once it is,
		// this call re-attaches to what was saved, or asks again.
		creating := p.creating
		r.mu.Unlock()
		// The write is bounded by sharedTimeout; this caller may leave
		// before it ends, and the hub's Close does not wait for it.
		select {
		case <-creating:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-h.quit:
			return nil, ErrClosed
		}
		return h.askDigested(ctx, token, req, sum)
	}
	switch s := r.settled[req.ID]; {
	case p == nil && s != nil:
		r.mu.Unlock()
		if s.sum != sum {
			return nil, ErrDuplicate
		}
		return h.reattachSettled(r, req.ID, s)
	case p == nil:
		// Not abandoned when the caller gives up meanwhile: the record may
		// land (and be shown by every instance) after the caller's context
		// ends, and then it needs this call's waiter to leave properly, so
		// its agent-gone notice and withdrawal are armed.
		r.askingLocked(req.ID, +1)
		counted := false // create counted this call as the waiter of its record
		defer func() {
			if !counted {
				r.mu.Lock()
				r.askingLocked(req.ID, -1)
				r.mu.Unlock()
			}
		}()
		var rep *Reply
		var err error
		begin := h.create
		if req.join {
			begin = h.join
		}
		if p, counted, rep, err = begin(ctx, r, token, req, sum); p == nil {
			return rep, err
		}
		if counted {
			break
		}
		r.mu.Lock()
		fallthrough
	default:
		if p.sum != sum {
			r.mu.Unlock()
			return nil, ErrDuplicate
		}
		p.waiters++
		stopTimer(&p.orphan)
		stopTimer(&p.notice)
		claim := p.holder != h.self || p.gone.Load()
		r.mu.Unlock()
		if claim {
			h.claim(ctx, r, p)
			h.log.Info("re-attached to a pending request", "kind", req.Kind, "id", req.ID)
		}
	}

	// A caller that can come back for the request (agentassistant-mcp
	// re-attaches by its ID, through another instance) is let go when
	// this one loses NATS; one that cannot (upstream's) waits here.
	var down <-chan struct{}
	if !req.WithdrawOnLeave {
		down = h.linkDown()
	}
	select {
	case <-p.done:
		h.wokeHook()
		if ctx.Err() != nil {
			// Its outcome came as the call ended: nobody reads this reply.
			h.keepIfUnread(r, p)
			return nil, ctx.Err()
		}
		r.mu.Lock()
		// Kept for the project's next call when it was written, maybe
		// before this instance heard it: taken once, cluster-wide. Or
		// written as delivered to a holder that is not this instance
		// (this call's claim was not saved): the holder, which has no
		// caller for it, would keep it for the project's next call.
		handOver := p.reply != nil && (p.reason == ReasonUndelivered || p.reason == "" && p.holder != h.self)
		r.mu.Unlock()
		if handOver {
			if err := h.reattachKept(r, req.ID); err != nil {
				return nil, err
			}
		}
		return p.reply, p.err
	case <-h.quit:
		return nil, ErrClosed
	case <-down:
		// The agent goes elsewhere; the request stays pending in NATS,
		// orphaned here until it comes back or another instance claims
		// it.
		h.detach(r, p, false)
		h.log.Info("agent call ended: this instance lost its link to NATS", "kind", req.Kind, "id", req.ID)
		return nil, errLinkLost
	case <-ctx.Done():
		h.wokeHook()
		// Withdrawn only when neither the leaving caller nor the one
		// that made it can come back for a missed answer.
		withdraw := h.detach(r, p, req.WithdrawOnLeave && p.req.WithdrawOnLeave)
		h.log.Debug("agent call went away", "kind", req.Kind, "id", req.ID)
		if withdraw {
			h.withdrawLeft(r, p)
		}
		h.keepIfUnread(r, p)
		return nil, ctx.Err()
	}
}

// create writes the record of req, a request new here, and returns the
// pending request to wait on, and whether the call is counted as its
// waiter already (its own record: one lock instead of three); or nil, and
// what the call returns, when the record could not be written, or one of
// that ID is settled already. The request is among the room's pending
// from before its record is written, unseen: a cancel meanwhile finds it,
// and withdraws it once it is saved. Past the room's bounds on what waits
// it is refused (pendingcap.go). Called with r.mu held; it returns with
// r.mu released.
func (h *Hub) create(ctx context.Context, r *room, token string, req Request, sum digest) (*pending, bool, *Reply, error) {
	if err := h.pendingRoomLocked(r, &req); err != nil {
		r.mu.Unlock()
		h.log.Warn("request refused: too many waiting", "kind", req.Kind, "id", req.ID, "err", err)
		return nil, false, nil, err
	}
	now := h.now()
	p := &pending{req: req, sum: sum, token: token, createdAt: now, deadline: now.Add(req.Timeout), done: make(chan struct{}), holder: h.self, creating: make(chan struct{})}
	r.pending[req.ID] = p
	rec := SharedRecord{Record: h.record(r, p, store.Pending, nil, ""), Holder: h.self}
	r.mu.Unlock()
	sctx, cancel := h.sharedCtx(ctx)
	rev, err := h.shared.Create(sctx, rec)
	cancel()
	created := err == nil
	if errors.Is(err, ErrRecordExists) {
		sctx, cancel := h.sharedCtx(ctx)
		rec, _, err = h.shared.Get(sctx, r.digest, req.ID)
		cancel()
		if errors.Is(err, ErrRecordMissing) {
			// Another write of it is in flight, not yet committed: a
			// replicated JetStream stream refuses a second create of
			// the key meanwhile, while no read finds it (a NATS cluster
			// without its quorum). That write may land, or be dropped:
			// the caller asks again with the ID, and finds which.
			err = fmt.Errorf("%w: the request's record is being written elsewhere: %w", ErrUnreachable, err)
		}
	}
	r.mu.Lock()
	close(p.creating)
	p.creating = nil
	if created {
		p.rev = max(p.rev, rev)
	} else if r.pending[req.ID] == p {
		delete(r.pending, req.ID) // another call's record stands
	}
	if err != nil {
		// Unreachable: the caller is told to try again, and comes back
		// with this ID, or its record, if it lands, is orphaned as any
		// whose caller left. Calls that re-attached meanwhile ask again.
		if !errors.Is(err, ErrRecordExists) && !errors.Is(err, ErrUnreachable) {
			r.noteRefusedLocked(req.ID) // it may land after all
		}
		r.mu.Unlock()
		if !errors.Is(err, ErrRecordExists) { // a record of its ID stands: no write refused
			h.unsaved("request refused: it cannot be saved", "kind", req.Kind, "id", req.ID, "err", err)
		}
		return nil, false, nil, &notSaved{what: "request", err: err}
	}
	r.takeRefusedLocked(req.ID) // asked again, and saved: not refused now
	h.saved()
	if created {
		p.waiters++
		r.askingLocked(req.ID, -1)
		r.mu.Unlock()
		at := h.now()
		h.emit(Event{Kind: Asked, Token: token, Request: req, AskedAt: now, At: at, Saved: at.Sub(now)})
		return p, true, nil, nil
	}
	r.mu.Unlock()
	return h.attachRecord(ctx, r, token, req, sum, rec)
}

// join is create for a caller that only re-attaches (Reattach): the
// request's record is read, never written; ErrUnknown when there is none.
// Called with r.mu held; it returns with r.mu released.
func (h *Hub) join(ctx context.Context, r *room, token string, req Request, sum digest) (*pending, bool, *Reply, error) {
	r.mu.Unlock()
	sctx, cancel := h.sharedCtx(ctx)
	rec, _, err := h.shared.Get(sctx, r.digest, req.ID)
	cancel()
	if errors.Is(err, ErrRecordMissing) {
		return nil, false, nil, ErrUnknown
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("read the request's record: %w", err)
	}
	return h.attachRecord(ctx, r, token, req, sum, rec)
}

// attachRecord is the pending request to wait on for rec, the record of
// req another call wrote, or what the call returns when it is settled
// (create's).
func (h *Hub) attachRecord(ctx context.Context, r *room, token string, req Request, sum digest, rec SharedRecord) (*pending, bool, *Reply, error) {
	if got := requestOf(rec.Record); got.Digest() != sum {
		return nil, false, nil, ErrDuplicate
	}
	if rec.Status != store.Pending {
		if rec.Taken {
			return nil, false, nil, ErrHandedOver
		}
		s := settledOf(rec.Record)
		if s.reply != nil {
			// Settled before this instance heard of it (its watch lags,
			// or the room forgot it past Retention): the answer may be
			// kept for the project's next call, or be kept by its holder
			// yet; handed to this caller once, cluster-wide, as to one
			// re-attaching to an outcome heard here (reattachSettled).
			if err := h.reattachKept(r, req.ID); err != nil {
				return nil, false, nil, err
			}
		}
		return nil, false, s.reply, s.err
	}
	r.mu.Lock()
	q := h.registerLocked(r, token, rec)
	if q == nil || q.creating != nil { // settled meanwhile, or asked again here
		r.mu.Unlock()
		reply, err := h.askDigested(ctx, token, req, sum)
		return nil, false, reply, err
	}
	r.mu.Unlock()
	return q, false, nil, nil
}

// claim makes this instance the holder of p's call and clears its
// agent-gone mark.
func (h *Hub) claim(ctx context.Context, r *room, p *pending) {
	from := "" // of the try that wrote: a compare-and-set reads again
	err := h.changeRecord(ctx, r, p, func(rec *SharedRecord) bool {
		from = ""
		if rec.Holder == h.self && !rec.Gone {
			return false
		}
		from = rec.Holder
		rec.Holder, rec.Gone = h.self, false
		return true
	})
	switch {
	case err != nil && !errors.Is(err, ErrNotPending):
		h.log.Warn("cannot record the agent's return", "id", p.req.ID, "err", err)
	case err == nil && from != "" && from != h.self:
		h.emit(Event{Kind: Asked, Again: true, Token: p.token, Request: p.req, AskedAt: p.createdAt, At: h.now()})
	}
}

// changeRecord applies change to p's record by compare-and-set (update).
// ErrNotPending: the record is settled.
func (h *Hub) changeRecord(ctx context.Context, r *room, p *pending, change func(*SharedRecord) bool) error {
	ctx, cancel := h.sharedCtx(ctx)
	defer cancel()
	settled := false
	_, _, err := h.update(ctx, r, p.req.ID, func(rec *SharedRecord) bool {
		settled = rec.Status != store.Pending
		return !settled && change(rec)
	})
	if err == nil && settled {
		return ErrNotPending
	}
	return err
}

// update applies change to the record of id by compare-and-set, reading
// it again when it changed meanwhile. change returns false when nothing
// is to be written. It reports whether it wrote, and the record as last
// read or written.
func (h *Hub) update(ctx context.Context, r *room, id string, change func(*SharedRecord) bool) (bool, SharedRecord, error) {
	for {
		rec, rev, err := h.shared.Get(ctx, r.digest, id)
		if err != nil || !change(&rec) {
			return false, rec, err
		}
		if _, err = h.shared.Update(ctx, rec, rev); !errors.Is(err, ErrRecordChanged) {
			return err == nil, rec, err
		}
	}
}

// detach drops one waiter; the last one leaving, on the holder,
// orphans the request, or, when it cannot come back for the answer
// (leaving), reports that the request is to be withdrawn.
func (h *Hub) detach(r *room, p *pending, leaving bool) (withdraw bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[p.req.ID] != p {
		return false
	}
	p.waiters--
	if p.waiters > 0 || p.holder != h.self {
		return false
	}
	if leaving {
		return true
	}
	h.orphanLocked(r, p)
	return false
}

// orphanLocked arms the agent-gone notice and the withdrawal of p,
// whose call went away from this instance. Each does nothing when a
// caller came back here, or through another instance meanwhile.
func (h *Hub) orphanLocked(r *room, p *pending) {
	stopTimer(&p.orphan)
	stopTimer(&p.notice)
	alone := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.pending[p.req.ID] == p && p.waiters <= 0 && p.holder == h.self
	}
	if !p.gone.Load() {
		p.notice = time.AfterFunc(h.notice, func() {
			if !alone() || !h.own("agent-gone mark", p.req.ID) {
				return
			}
			defer h.writes.Done()
			err := h.changeRecord(context.Background(), r, p, func(rec *SharedRecord) bool {
				if rec.Holder != h.self || rec.Gone {
					return false
				}
				rec.Gone = true
				return true
			})
			if err != nil && !errors.Is(err, ErrNotPending) {
				h.log.Warn("cannot record that no agent waits", "id", p.req.ID, "err", err)
			}
		})
	}
	p.orphan = time.AfterFunc(h.grace, func() {
		if alone() && h.abandon(r, p) == nil {
			h.log.Info("orphaned request withdrawn", "kind", p.req.Kind, "id", p.req.ID, "after", h.grace)
		}
	})
}

// abandon withdraws p, orphaned past the grace, unless its deadline has
// passed: then it times out, as its deadline's try (stood in for by the
// withdrawal's tries while neither could be saved, retryOutcome) would.
func (h *Hub) abandon(r *room, p *pending) error {
	if p.req.Timeout > 0 && !h.now().Before(p.deadline) {
		return h.settle(r, p, nil, ErrTimeout, "timeout")
	}
	return h.settle(r, p, nil, ErrWithdrawn, ReasonAbandoned)
}

// settle ends p with its outcome, tells the clients and keeps the outcome
// for callers that re-attach. It returns ErrNotPending when p was already
// settled, ErrClosed when the hub closes while p's record, new here, is
// still being written. The outcome is saved before anyone hears of it: the agent's
// reply and the other clients' notification wait for the store. An answer
// that cannot be saved is not taken (a notSaved error; the request stays
// pending, answerable again); a timeout or abandonment is tried again
// until it is saved (link.go).
//
// The outcome is written by compare-and-set: the instance whose write
// lands wakes its callers at once; every instance, this one too, ends the
// request and tells its clients when it hears the change (Apply), in the
// order of the changes.
func (h *Hub) settle(r *room, p *pending, rep *Reply, err error, reason string) error {
	if !h.own("outcome of a request", p.req.ID) {
		return ErrNotPending // shutting down: the request stays pending in the store
	}
	defer h.writes.Done()
	r.mu.Lock()
	if r.pending[p.req.ID] != p || p.settling {
		r.mu.Unlock()
		return ErrNotPending
	}
	p.settling = true
	if p.creating != nil && p.rev == 0 {
		// Its record is being written, and not heard yet: the outcome is
		// written over it, once it is saved.
		creating := p.creating
		r.mu.Unlock()
		select {
		case <-creating:
		case <-h.quit:
			// Close waits for this outcome's write (own), not for the
			// record's: the request stays pending in the store.
			r.mu.Lock()
			p.settling = false
			r.mu.Unlock()
			return ErrClosed
		}
		r.mu.Lock()
		if r.pending[p.req.ID] != p {
			p.settling = false
			r.mu.Unlock()
			return ErrNotPending // it could not be saved
		}
	}
	status := statusOf(err)
	if rep != nil && (p.holder == h.self && p.waiters <= 0 && r.asking[p.req.ID] == 0 || p.holder != h.self && p.gone.Load()) {
		// No agent waits for this answer: here, or where its call was
		// (whose instance said so, Gone).
		reason = ReasonUndelivered
	}
	out := h.record(r, p, status, rep, reason)
	out.ClosedAt = h.now()
	// The record as last heard: written at once against its revision,
	// it saves a read (a round trip to NATS) on every answer; if it
	// changed since, it is read again.
	kept := keptReply(rep)
	written := SharedRecord{Record: out, Holder: p.holder, Gone: p.gone.Load(), reply: kept}
	rev := p.rev
	r.mu.Unlock()
	start := h.now()
	serr := ErrRecordChanged
	if rev > 0 {
		ctx, cancel := h.sharedCtx(context.Background())
		_, serr = h.shared.Update(ctx, written, rev)
		cancel()
	}
	if errors.Is(serr, ErrRecordChanged) {
		serr = h.changeRecord(context.Background(), r, p, func(rec *SharedRecord) bool {
			written = SharedRecord{Record: out, Holder: rec.Holder, Gone: rec.Gone, reply: kept}
			*rec = written
			return true
		})
	}
	if serr != nil {
		r.mu.Lock()
		p.settling = false
		if !errors.Is(serr, ErrNotPending) {
			p.unsure = &written.Record
		}
		if p.heard != nil {
			// Settled otherwise meanwhile, and heard while this outcome
			// was written: its callers have that one.
			h.wakeLocked(p, p.heard, p.heard.reason)
		}
		r.mu.Unlock()
		if errors.Is(serr, ErrNotPending) {
			return ErrNotPending // another instance settled it first
		}
		if rep != nil {
			h.unsaved("answer refused: it cannot be saved", "kind", p.req.Kind, "id", p.req.ID, "err", serr)
			return &notSaved{what: "answer", err: serr}
		}
		h.retryOutcome(r, p, err, reason, serr)
		return serr
	}
	h.saved()
	// The callers here have the outcome at once, after the subscribers
	// (so that one who acts on it next finds it told); the rest (the
	// clients told, the outcome kept) when the change is heard, in its
	// order.
	now := h.now()
	h.emitOutcome(p, rep, err, reason, now, now.Sub(start))
	r.mu.Lock()
	h.wakeLocked(p, &settled{reply: rep, err: err}, written.ClosedNote)
	r.mu.Unlock()
	return nil
}

// wakeLocked gives p's callers its outcome, once; note is its record's
// (an answer's ReasonUndelivered: it was kept for the project's next call).
// Called with r.mu held.
func (h *Hub) wakeLocked(p *pending, s *settled, note string) {
	if p.woken {
		return
	}
	p.woken = true
	p.reply, p.err, p.reason = s.reply, s.err, note
	close(p.done)
}
