package hub

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
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
	// The revision of its record last applied, and the instance that
	// holds its agent's call (records.go).
	rev    uint64
	holder string
	// woken: its callers have the outcome (done is closed); in cluster
	// mode before the change is heard and it leaves the room's pending.
	woken bool
	// heard: the outcome heard while one was being written here
	// (settling), for the writer to wake the callers with if its own
	// did not land.
	heard *settled
	// unsure: the outcome written here whose save went unconfirmed (the
	// store did not answer in time): if it landed after all, this
	// instance, its writer, tells the subscribers when it hears it
	// (finish), as it would have on the save's answer.
	unsure *store.Record
	// creating: while its record, new here, is being written, closed
	// (and nil) once it is, or could not be.
	creating chan struct{}
	// retry: the wait before the last try again of an outcome that
	// could not be saved (link.go).
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
	return h.askDigested(ctx, token, req, req.Digest()) // digested outside the lock: the text may be long
}

// arm starts the deadline timer. Called with r.mu held.
func (h *Hub) arm(r *room, p *pending) {
	if p.req.Timeout > 0 {
		p.expiry = time.AfterFunc(p.deadline.Sub(h.now()), func() {
			// The deadline is on the hub's clock, which may have moved
			// back since the timer was armed (in a cluster, NATS's clock
			// as reckoned anew at a heartbeat): not due yet, it waits
			// the rest.
			if p.deadline.After(h.now()) {
				r.mu.Lock()
				if !p.overLocked() {
					h.arm(r, p)
				}
				r.mu.Unlock()
				return
			}
			if h.settle(r, p, nil, ErrTimeout, "timeout") == nil {
				h.log.Info("request timed out", "kind", p.req.Kind, "id", p.req.ID)
			}
		})
	}
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

// Answer records a reply to the request id of the given kind. The first
// answer wins; the other clients of the room get a reply notification once
// it is saved. An answer that cannot be saved is refused (ErrNotSaved) and
// the request stays pending.
//
// An answer the question's options do not allow (wire.CheckAnswer) is
// refused with ErrNotAnOption, and the request stays pending.
//
// ctx is the answering caller's: its going away ends a wait to hear a
// request asked elsewhere (heardLate).
func (h *Hub) Answer(ctx context.Context, token string, kind wire.Kind, id string, rep Reply) error {
	r, p, err := h.answerable(ctx, token, kind, id, &rep)
	if err != nil {
		return err
	}
	validReply(&rep)
	return h.settle(r, p, &rep, nil, "")
}

// Allows reports whether Answer would take rep for the request id now
// (ErrNotPending, ErrNotAnOption), without answering: a door that spends
// something to answer (a single-use capability) asks first.
func (h *Hub) Allows(ctx context.Context, token string, kind wire.Kind, id string, rep Reply) error {
	_, _, err := h.answerable(ctx, token, kind, id, &rep)
	return err
}

// answerable is the pending request id of token when rep may answer it:
// of kind, and of rep.Of unless that is zero. A client's error reply (a
// device that declines or cannot show the question) ends the call as an
// error: no choice to check.
func (h *Hub) answerable(ctx context.Context, token string, kind wire.Kind, id string, rep *Reply) (*room, *pending, error) {
	r := h.room(token)
	p, shown := r.shownPending(id)
	if !shown && h.heardLate(ctx, r, id) {
		p, shown = r.shownPending(id)
	}
	if !shown || p.req.Kind != kind || !p.answeredBy(rep.Of) {
		return nil, nil, ErrNotPending
	}
	// Every door answers here: a device, a capability, a chat reply.
	// What the question allows is checked once, for all of them.
	if err := wire.CheckAnswer(p.req.Questions, rep.Contents); err != nil && !rep.IsError && !rep.AsWritten {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotAnOption, err)
	}
	return r, p, nil
}

// shownPending is r's pending request id, and whether it is shown.
func (r *room) shownPending(id string) (*pending, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[id]
	return p, p != nil && p.shown
}

// heardLate waits, up to catchUp, to hear the pending record id this
// instance has not heard yet, and reports whether it was: in a cluster a
// question asked elsewhere reaches a person through a door of this
// instance's (a mail, a chat, a one-tap link) as its record reaches
// this instance's watch, and one who answers at once must not be told
// it is no longer pending.
//
// A cancel through this instance waits the same way (Cancel).
//
// Each look is a read of the shared store, on the answering caller's
// goroutine: it ends with ctx, and within catchUp. A room looks at most
// lateBurst times at once and lateRate times a second after that (a
// client answering made-up IDs makes no more reads than that), and an
// ID a look did not find pending is not looked for again for catchUp
// (a door that asks Allows, then answers, reads once).
func (h *Hub) heardLate(ctx context.Context, r *room, id string) bool {
	if h.local != nil {
		return false // one process: every record is heard as written
	}
	r.mu.Lock()
	ok := r.late.take(id, h.now())
	r.mu.Unlock()
	if !ok {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, catchUp)
	defer cancel()
	rec, rev, err := h.shared.Get(lctx, r.digest, id)
	if err == nil && rec.Status == store.Pending {
		if _, heard := h.seqs.window(lctx, rev); heard >= rev {
			return true
		}
	}
	if ctx.Err() == nil { // a caller that left learnt nothing of id
		r.mu.Lock()
		r.late.missed(id, h.now())
		r.mu.Unlock()
	}
	return false
}

// The budget of a room's looks for requests not heard yet (heardLate).
const (
	lateBurst = 8
	lateRate  = 4 // a second
)

// lateLooks is a room's budget of looks for requests not heard yet, and
// the IDs they did not find, for catchUp. Guarded by the room's lock.
type lateLooks struct {
	tokens float64
	at     time.Time
	// By the ID's digest (an ID is what the client sent, up to a
	// frame's size): until when it is not looked for.
	misses map[digest]time.Time
}

// take reports whether id may be looked for now, and counts the look.
func (l *lateLooks) take(id string, now time.Time) bool {
	if until, ok := l.misses[sha256.Sum256([]byte(id))]; ok && now.Before(until) {
		return false
	}
	if l.at.IsZero() {
		l.tokens = lateBurst
	} else {
		// Never less for a clock moved back (the hub's, corrected).
		l.tokens = min(lateBurst, l.tokens+max(0, now.Sub(l.at).Seconds())*lateRate)
	}
	l.at = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// missed notes that a look did not find id pending. What it keeps is
// bounded by the budget: at most lateBurst+lateRate×catchUp IDs.
func (l *lateLooks) missed(id string, now time.Time) {
	if l.misses == nil {
		l.misses = make(map[digest]time.Time)
	}
	for k, until := range l.misses {
		if !now.Before(until) {
			delete(l.misses, k)
		}
	}
	l.misses[sha256.Sum256([]byte(id))] = now.Add(catchUp)
}

// Cancel withdraws a pending request of token at the agent's wish. In
// a cluster the request may have been asked through another instance
// moments before, its record not heard here yet: the cancel waits to
// hear it as an answer does (heardLate), or the request would stay
// pending, shown on every device, with its agent told it was not.
func (h *Hub) Cancel(ctx context.Context, token, id string) error {
	r := h.room(token)
	r.mu.Lock()
	p := r.pending[id]
	r.mu.Unlock()
	if p == nil && h.heardLate(ctx, r, id) {
		r.mu.Lock()
		p = r.pending[id]
		r.mu.Unlock()
	}
	if p == nil {
		return ErrNotPending
	}
	if err := h.settle(r, p, nil, ErrWithdrawn, "cancelled"); err != nil {
		return err
	}
	h.log.Info("request cancelled by the agent", "kind", p.req.Kind, "id", id)
	return nil
}

// digest identifies a request's content (wire.Digest), so a caller
// re-attaching by ID can be told from another request that reuses the ID.
type digest = [sha256.Size]byte

// Digest tells q apart from another request under its ID (wire.Digest).
func (q *Request) Digest() digest { return wire.Digest(q.Kind, q.ProjectDirectory, q.Text) }

// Shown tells what q shows apart from what another request under its ID
// shows (wire.Shown): what a capability answers.
func (q *Request) Shown() digest {
	return wire.Shown(q.Kind, q.ProjectDirectory, q.Text, q.Questions)
}

// answeredBy says whether an answer for the request of digest of
// (Reply.Of) may answer p: zero (no capability says), or what p shows.
// The previous release's capabilities hold p's Digest instead, which
// leaves out its options; they answer as they did in that release until
// they expire (instances of it may make them yet, in a cluster upgraded
// one instance at a time). This release makes none.
func (p *pending) answeredBy(of digest) bool {
	return of == digest{} || of == p.req.Shown() || of == p.sum
}

// statusOf is the store's status of a request settled with err (nil:
// answered); apply.go's settledOf reads it back.
func statusOf(err error) string {
	switch {
	case errors.Is(err, ErrTimeout):
		return store.TimedOut
	case err != nil:
		return store.Cancelled
	}
	return store.Answered
}

// validReply makes rep's strings UTF-8, replacing what is not (an e-mail
// body that only says it is UTF-8): every door must be able to encode the
// answer, and the saved record must hold it whole. Who answered is shown
// on one line everywhere, whichever door named it (a webhook's "by", a
// push device's name): it loses what is not text on one line.
func validReply(rep *Reply) {
	rep.ClientID, rep.Nickname = wire.OneLine(rep.ClientID), wire.OneLine(rep.Nickname)
	for _, c := range rep.Contents {
		wire.ValidUTF8(c)
	}
	for k, v := range rep.Meta {
		if nk, nv := wire.ValidString(k), wire.ValidString(v); nk != k || nv != v {
			meta := make(map[string]string, len(rep.Meta))
			for k, v := range rep.Meta {
				meta[wire.ValidString(k)] = wire.ValidString(v)
			}
			rep.Meta = meta
			return
		}
	}
}

// Reattach waits for the outcome of the request id of token as Ask does
// for a caller re-attaching by ID, for a caller that does not have the
// request's text: a call resumed through another instance of a cluster
// than the one it was made through. sum is the request's digest
// (wire.Digest of its kind, project directory and text). It never asks:
// a request pending nowhere and not kept (Retention) is ErrUnknown. With
// the outcome it returns the request's choices, to read the answer
// against.
func (h *Hub) Reattach(ctx context.Context, token string, kind wire.Kind, id string, sum [sha256.Size]byte) (*Reply, []*pb.Question, error) {
	select {
	case <-h.quit:
		return nil, nil, ErrClosed
	default:
	}
	qs, err := h.questionsOf(ctx, token, id)
	if err != nil {
		return nil, nil, err
	}
	rep, err := h.askDigested(ctx, token, Request{Kind: kind, ID: id, join: true}, sum)
	return rep, qs, err
}

// questionsOf is the choices of the request id, as this instance knows
// them, or as its record says.
func (h *Hub) questionsOf(ctx context.Context, token, id string) ([]*pb.Question, error) {
	r := h.room(token)
	r.mu.Lock()
	p, s := r.pending[id], r.settled[id]
	r.mu.Unlock()
	switch {
	case p != nil:
		return p.req.Questions, nil
	case s != nil:
		return s.questions, nil
	}
	sctx, cancel := h.sharedCtx(ctx)
	defer cancel()
	rec, _, err := h.shared.Get(sctx, r.digest, id)
	switch {
	case errors.Is(err, ErrRecordMissing):
		return nil, ErrUnknown
	case err != nil:
		return nil, fmt.Errorf("read the request's record: %w", err)
	}
	return requestOf(rec.Record).Questions, nil
}
