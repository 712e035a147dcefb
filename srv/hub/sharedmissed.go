package hub

import (
	"context"
	"errors"
	"slices"

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

// handOverShared marks the kept answer id handed over, by
// compare-and-set. It reports whether this call did it, and the record.
func (h *Hub) handOverShared(r *room, id string, taken bool) (bool, SharedRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	for {
		rec, rev, err := h.shared.Get(ctx, r.digest, id)
		if err != nil {
			return false, rec, err
		}
		if rec.ClosedNote != ReasonUndelivered {
			return false, rec, nil
		}
		rec.ClosedNote, rec.Taken = ReasonHandedOver, taken
		if _, err = h.shared.Update(ctx, rec, rev); !errors.Is(err, ErrRecordChanged) {
			return err == nil, rec, err
		}
	}
}

// takeMissedShared is TakeMissed in cluster mode.
func (h *Hub) takeMissedShared(r *room, project string, except []string, limit int) []Missed {
	r.mu.Lock()
	h.pruneMissedLocked(r, h.now())
	var kept []Missed
	for _, id := range r.missedOrder {
		if m := r.missed[id]; m.p.req.ProjectDirectory == project && !slices.Contains(except, id) {
			kept = append(kept, Missed{Kind: m.p.req.Kind, ID: id, Text: m.p.req.Text, CreatedAt: m.p.createdAt, AnsweredAt: m.at, Reply: m.reply})
		}
	}
	r.mu.Unlock()
	var out []Missed
	for _, m := range kept {
		if len(out) == limit && limit > 0 {
			break
		}
		// The change is heard here too, maybe before this call goes on.
		ok, rec, err := h.handOverShared(r, m.ID, true)
		if err != nil {
			h.log.Warn("cannot hand over an answer kept for an absent agent", "id", m.ID, "err", err)
			continue
		}
		r.mu.Lock()
		if ok || rec.Taken {
			h.takenLocked(r, m.ID)
		} else {
			h.handedOverLocked(r, m.ID) // its agent re-attached by ID
		}
		r.mu.Unlock()
		if ok {
			out = append(out, m)
		}
	}
	if len(out) > 0 {
		h.log.Info("handed over answers kept for an absent agent", "count", len(out))
	}
	return out
}

// takenLocked forgets the kept answer id, which an agent took by
// TakeMissed. Called with r.mu held.
func (h *Hub) takenLocked(r *room, id string) {
	h.handedOverLocked(r, id)
	if s := r.settled[id]; s != nil {
		s.takenElsewhere = true
	}
}

// reattachSettledShared is a caller re-attaching by ID to the settled
// request id (whose outcome is s) in cluster mode: a kept answer is handed
// to it, once cluster-wide; one taken by TakeMissed is not. Whether an
// answer was kept, or taken, is asked of the record, not of what this
// instance has heard: it may not have heard even its own write yet, while
// another instance's call took the answer.
func (h *Hub) reattachSettledShared(r *room, id string, s *settled) (*Reply, error) {
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
	_, rec, err := h.handOverShared(r, id, false)
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
	case rec.Status == store.Answered && rec.ClosedNote == ReasonUndelivered && r.missed[rec.ID] == nil && r.settled[rec.ID] != nil && r.settled[rec.ID].delivered:
		// A caller here had it before its holder, which had none, kept
		// it: handed over, not kept again.
		h.handOverLater(r, rec.ID)
	case rec.Status == store.Answered && rec.ClosedNote == ReasonUndelivered && r.missed[rec.ID] == nil:
		req := requestOf(rec.Record)
		p := &pending{req: req, sum: req.digest(), token: token, createdAt: rec.CreatedAt, deadline: rec.Deadline}
		h.keepMissedLocked(r, p, decodeReply(rec.Reply), rec.ClosedAt)
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
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	for {
		rec, rev, err := h.shared.Get(ctx, r.digest, id)
		if err == nil {
			if rec.Status != store.Answered || rec.ClosedNote != "" || rec.Holder != h.self {
				return
			}
			rec.ClosedNote = ReasonUndelivered
			if _, err = h.shared.Update(ctx, rec, rev); errors.Is(err, ErrRecordChanged) {
				continue
			}
		}
		if err != nil {
			h.log.Error("cannot keep an answer no agent had", "id", id, "err", err)
			return
		}
		h.log.Info("kept an answer no agent had for the project's next call", "id", id)
		return
	}
}

// handOverLater marks the kept answer to id handed over cluster-wide,
// on a goroutine of the hub's (goWrite): a caller had it.
func (h *Hub) handOverLater(r *room, id string) {
	h.goWrite("hand-over of a kept answer", id, func() {
		if _, _, err := h.handOverShared(r, id, false); err != nil {
			h.log.Warn("cannot record an answer's hand-over", "id", id, "err", err)
		}
	})
}
