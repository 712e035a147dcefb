package hub

import (
	"context"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// settled is the outcome of a request that is no longer pending, kept for
// Retention so a caller that re-attaches (same ID, same request) still
// gets it.
type settled struct {
	sum  digest // of the request
	kind wire.Kind
	// questions are the request's choices, to read its answer against
	// (Reattach).
	questions []*pb.Question
	reply     *Reply
	err       error
	// reason is why it was withdrawn or timed out, as RequestCancelled
	// said it.
	reason string
	at     time.Time
	// takenElsewhere: the answer was kept for an absent agent and another
	// call of the project took it (TakeMissed); a re-attach by ID gets
	// ErrHandedOver, so two agents never act on one answer.
	takenElsewhere bool
	// delivered: a caller here had the answer (cluster mode), so it is
	// not kept for the project's next call when its holder, which had
	// no caller, says it should be (missed.go).
	delivered bool
	// bytes is what keeping it costs (store.Record.Bytes), counted in the
	// room's settledBytes while it is kept.
	bytes int64
}

// maxSettled caps the outcomes a room keeps in memory for re-attaching
// callers (the store keeps them all, as history); Options.RetentionBytes
// caps their bytes.
const maxSettled = 4096

// keepSettledLocked records an outcome and forgets those older than
// cutoff, or beyond maxSettled or the room's bytes of outcomes. Called
// with r.mu held.
func (h *Hub) keepSettledLocked(r *room, id string, s *settled, cutoff time.Time) {
	if old := r.settled[id]; old != nil {
		r.settledBytes -= old.bytes
	}
	r.settled[id] = s
	r.settledBytes += s.bytes
	r.settledOrder = append(r.settledOrder, id)
	h.forgetSettledLocked(r, cutoff, s)
}

// forgetSettledLocked forgets the outcomes older than cutoff, or beyond
// maxSettled or the room's bytes, but keep (the newest, just kept; the
// next sweep looks at it again): outcomes arrive in time order, so the
// oldest are at the front of settledOrder and each is dropped once. One
// dropped before its time is logged. Called with r.mu held.
func (h *Hub) forgetSettledLocked(r *room, cutoff time.Time, keep *settled) {
	for len(r.settledOrder) > 0 {
		old := r.settledOrder[0]
		o := r.settled[old]
		if keep != nil && o == keep {
			break
		}
		count, size := len(r.settledOrder) > maxSettled, r.settledBytes > h.retentionBytes
		expired := o != nil && o.at.Before(cutoff)
		if o != nil && !expired && !count && !size {
			break
		}
		if o != nil {
			delete(r.settled, old)
			r.settledBytes -= o.bytes
			if !expired {
				h.log.Info("outcome kept for re-attaching callers dropped: the token keeps too many of them",
					"id", old, "bytes", o.bytes, "over", overWhat(count))
			}
		}
		r.settledOrder[0] = ""
		r.settledOrder = r.settledOrder[1:]
	}
	if len(r.settledOrder) == 0 {
		r.settledOrder = nil // its array goes too
	}
}

// sweepEvery is how often a room that keeps something for a while (the
// outcomes for Retention, its events for the replay window, answers for
// absent agents) lets go of what is past its time. Else only the next
// request settled let go of them, and a server whose traffic stopped
// kept the last of them, images and all, for good.
const sweepEvery = time.Minute

// sweepLaterLocked has r swept in sweepEvery, unless it will be already
// or the hub is closed. Called with r.mu held.
func (h *Hub) sweepLaterLocked(r *room) {
	select {
	case <-h.quit:
		return
	default:
	}
	if r.sweeper == nil {
		r.sweeper = time.AfterFunc(sweepEvery, func() { h.sweep(r) })
	}
}

// sweep lets go of what r keeps past its time, and of the records behind
// it; again in sweepEvery while r keeps any of it.
func (h *Hub) sweep(r *room) {
	now := h.now()
	r.mu.Lock()
	r.sweeper = nil
	h.forgetSettledLocked(r, now.Add(-h.retention), nil)
	r.events.trim(now)
	h.pruneMissedLocked(r, now)
	if len(r.settledOrder) > 0 || r.events.len() > 0 || len(r.missedOrder) > 0 {
		h.sweepLaterLocked(r)
	}
	r.mu.Unlock()
	if h.local != nil {
		h.local.sweep(now)
	}
}

// Answered is the reply the request id of token was answered with,
// while its outcome is kept (Retention); false when it is pending, was
// settled without an answer, or is not known. A door that takes the
// same answer twice (a chat's update delivered again) tells its own
// answer, taken, from another's. In a cluster an answer written by
// another instance a moment ago may not be heard here yet: the record
// is read then.
func (h *Hub) Answered(token, id string) (*Reply, bool) {
	r := h.room(token)
	r.mu.Lock()
	s := r.settled[id]
	r.mu.Unlock()
	if s == nil && h.local == nil {
		ctx, cancel := h.sharedCtx(context.Background())
		defer cancel()
		if rec, _, err := h.shared.Get(ctx, r.digest, id); err == nil {
			s = rec.outcome()
		}
	}
	if s == nil || s.reply == nil {
		return nil, false
	}
	return s.reply, true
}
