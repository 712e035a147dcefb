package hub

import (
	"context"

	"github.com/agentassistant/agentassistant/srv/store"
)

// Cluster mode: answers kept for an absent agent, on every instance.
//
// An answer written with the note ReasonUndelivered is kept by every
// instance that hears it (Apply), so TakeMissed finds it wherever the
// next call of the project comes in. It is handed over once, cluster-wide,
// by compare-and-set of its record: the note becomes ReasonHandedOver (and
// Taken when TakeMissed took it, so a re-attach by ID then gets
// ErrHandedOver); every instance hearing that forgets it.

// handOver marks the kept answer id handed over, by
// compare-and-set. It reports whether this call did it, and the record.
func (h *Hub) handOver(r *room, id string, taken bool) (bool, SharedRecord, error) {
	ctx, cancel := h.sharedCtx(context.Background())
	defer cancel()
	return h.update(ctx, r, id, func(rec *SharedRecord) bool {
		if rec.ClosedNote != ReasonUndelivered {
			return false
		}
		rec.ClosedNote, rec.Taken = ReasonHandedOver, taken
		return true
	})
}

// takenLocked forgets the kept answer id, which an agent took by
// TakeMissed. Called with r.mu held.
func (h *Hub) takenLocked(r *room, id string) {
	h.handedOverLocked(r, id)
	if s := r.settled[id]; s != nil {
		s.takenElsewhere = true
	}
}

// reattachSettled is a caller re-attaching by ID to the settled
// request id (whose outcome is s) in cluster mode: a kept answer is handed
// to it, once cluster-wide; one taken by TakeMissed is not. Whether an
// answer was kept, or taken, is asked of the record, not of what this
// instance has heard: it may not have heard even its own write yet, while
// another instance's call took the answer.
func (h *Hub) reattachSettled(r *room, id string, s *settled) (*Reply, error) {
	r.mu.Lock()
	taken := s.takenElsewhere
	r.mu.Unlock()
	if taken {
		return nil, ErrHandedOver
	}
	if s.reply == nil {
		return nil, s.err
	}
	if err := h.reattachKept(r, id); err != nil {
		return nil, err
	}
	r.mu.Lock()
	// A caller had it: if its holder keeps it only now, it is handed
	// over then (applySettledLocked).
	s.delivered = true
	r.mu.Unlock()
	return s.reply, s.err
}

// reattachKept hands the answer to id, which may be kept for the
// project's next call, to a caller re-attaching by ID, by compare-and-set
// of its record; ErrHandedOver when another call took it. A record that
// cannot be read leaves the caller its answer, as before the cluster.
func (h *Hub) reattachKept(r *room, id string) error {
	_, rec, err := h.handOver(r, id, false)
	if err != nil {
		h.log.Warn("cannot record an answer's hand-over", "id", id, "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Taken {
		h.takenLocked(r, id)
		return ErrHandedOver
	}
	h.handedOverLocked(r, id)
	return nil
}

// applySettledLocked brings a settled record heard for a request not
// pending here: its outcome is kept for re-attaching callers, a kept
// answer kept, a handed-over one forgotten. Called with r.mu held.
func (h *Hub) applySettledLocked(r *room, token string, rec SharedRecord) {
	cutoff := h.now().Add(-h.retention)
	if r.settled[rec.ID] == nil && !rec.ClosedAt.Before(cutoff) {
		r.keepSettled(rec.ID, settledOf(rec.Record), cutoff)
	}
	switch {
	case rec.Status == store.Answered && rec.ClosedNote == ReasonUndelivered && r.missed[rec.ID] == nil:
		if s := r.settled[rec.ID]; s != nil && s.delivered {
			// A caller here had it before its holder, which had none,
			// kept it: handed over, not kept again.
			h.handOverLater(r, rec.ID)
		} else {
			h.keepMissedLocked(r, pendingFrom(token, rec), decodeReply(rec.Reply), rec.ClosedAt)
		}
	case rec.ClosedNote == ReasonHandedOver && rec.Taken:
		h.takenLocked(r, rec.ID)
	case rec.ClosedNote == ReasonHandedOver:
		h.handedOverLocked(r, rec.ID)
	}
}

// unheardLocked reports whether rec, the answer that settled p, was
// written by another instance as if its agent had it, while this one,
// the holder of p's call, has no caller for it: its call left moments
// before, too recently for the agent-gone mark (Gone) to tell the
// answering instance. Called with r.mu held.
func (h *Hub) unheardLocked(r *room, p *pending, rec SharedRecord) bool {
	return rec.Status == store.Answered && rec.ClosedNote == "" && rec.Holder == h.self &&
		p.waiters <= 0 && r.asking[p.req.ID] == 0
}

// keepUnheard marks the answer to id, which no agent had (unheardLocked),
// undelivered by compare-and-set: every instance then keeps it for the
// project's next call, as one written so (Apply).
func (h *Hub) keepUnheard(r *room, id string) {
	ctx, cancel := h.sharedCtx(context.Background())
	defer cancel()
	kept, _, err := h.update(ctx, r, id, func(rec *SharedRecord) bool {
		if rec.Status != store.Answered || rec.ClosedNote != "" || rec.Holder != h.self {
			return false
		}
		rec.ClosedNote = ReasonUndelivered
		return true
	})
	switch {
	case err != nil:
		h.log.Error("cannot keep an answer no agent had", "id", id, "err", err)
	case kept:
		h.log.Info("kept an answer no agent had for the project's next call", "id", id)
	}
}

// handOverLater marks the kept answer to id handed over cluster-wide,
// on a goroutine of the hub's (goWrite): a caller had it.
func (h *Hub) handOverLater(r *room, id string) {
	h.goWrite("hand-over of a kept answer", id, func() {
		if _, _, err := h.handOver(r, id, false); err != nil {
			h.log.Warn("cannot record an answer's hand-over", "id", id, "err", err)
		}
	})
}
