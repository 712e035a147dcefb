package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Answers no agent waited for.
//
// A request outlives its agent's call: the call may go away (the LLM
// client restarted agentassistant-mcp, the link stayed down past the
// deadline) while the question stays on the screens, and the person may
// still answer it. Such an answer is kept, in the store and here, for
// MissedRetention, and handed over once: to the agent that re-attaches
// with the request's ID, or to the next agent that asks for the missed
// answers of the same token and project (TakeMissed).
//
// While a pending request has no caller, the clients are told after
// OrphanNotice (RequestAgentStatus, agent_gone), and told again when a
// caller re-attaches.

// Reasons a settled record in the store carries (its note).
const (
	// ReasonUndelivered marks an answer given while no agent waited for it.
	ReasonUndelivered = "undelivered"
	// ReasonHandedOver marks such an answer once an agent has it.
	ReasonHandedOver = "handed over"
	// ReasonNotSaved closes a request its agent was told could not be
	// saved, whose write landed after all (cluster mode).
	ReasonNotSaved = "not saved"
	// ReasonAbandoned closes a request withdrawn because its caller went
	// away and did not come back (or takes no missed answers); clients
	// see it as the cancellation's reason.
	ReasonAbandoned = "abandoned"
)

// maxMissed caps the answers a room keeps for absent agents, as
// Options.MissedBytes caps their bytes; past either the oldest is no
// longer offered (it stays in the history).
const maxMissed = 256

// missed is an answer kept for an absent agent.
type missed struct {
	p     *pending
	reply *Reply
	at    time.Time // when it was answered
	bytes int64     // what keeping it costs (store.Record.Bytes)
}

// Missed is an answer given while no agent waited for it.
type Missed struct {
	Kind       wire.Kind
	ID         string
	Text       string // the question or the summary
	CreatedAt  time.Time
	AnsweredAt time.Time
	Reply      *Reply
}

// TakeMissed hands over the answers kept for absent agents of token whose
// requests came from project, oldest first, at most limit (0: all), except
// those of the request IDs in except (the caller still waits on them and
// gets them by re-attaching). Each is handed over once.
func (h *Hub) TakeMissed(token, project string, except []string, limit int) []Missed {
	r := h.room(token)
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
		ok, rec, err := h.handOver(r, m.ID, true)
		if errors.Is(err, ErrRecordMissing) {
			// Its record is no longer kept (its room's records went
			// over their bytes a moment before the room did): nor is
			// the answer, as once it expired.
			r.mu.Lock()
			h.handedOverLocked(r, m.ID)
			r.mu.Unlock()
			continue
		}
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

// keepMissedLocked keeps rep, the answer to p given at when no agent
// waited, which costs size bytes (store.Record.Bytes). Called with r.mu held.
func (h *Hub) keepMissedLocked(r *room, p *pending, rep *Reply, at time.Time, size int64) {
	id := p.req.ID
	if old, ok := r.missed[id]; ok {
		r.missedBytes -= old.bytes
	} else {
		// In order of answer time, after those of the same time (the
		// newest is the last); restored ones may come in any order.
		i, _ := slices.BinarySearchFunc(r.missedOrder, at, func(x string, t time.Time) int {
			if r.missed[x].at.After(t) {
				return 1
			}
			return -1
		})
		r.missedOrder = slices.Insert(r.missedOrder, i, id)
	}
	r.missed[id] = &missed{p: p, reply: rep, at: at, bytes: size}
	r.missedBytes += size
	h.pruneMissedLocked(r, h.now())
}

// pruneMissedLocked forgets kept answers past MissedRetention, and the
// oldest beyond maxMissed or MissedBytes, but the newest; one dropped
// before its time is logged, as its agent will not have it.
func (h *Hub) pruneMissedLocked(r *room, now time.Time) {
	cutoff := now.Add(-h.missedFor)
	drop := 0
	for ; drop < len(r.missedOrder); drop++ {
		id := r.missedOrder[drop]
		m := r.missed[id]
		count := len(r.missedOrder)-drop > maxMissed
		size := r.missedBytes > h.missedBytes && drop < len(r.missedOrder)-1
		expired := m.at.Before(cutoff)
		if !expired && !count && !size {
			break
		}
		if !expired {
			h.log.Warn("answer kept for an absent agent dropped: the token keeps too many; its agent is told it is no longer kept",
				"id", id, "bytes", m.bytes, "over", overWhat(count))
		}
		delete(r.missed, id)
		r.missedBytes -= m.bytes
	}
	if drop > 0 {
		r.missedOrder = slices.Delete(r.missedOrder, 0, drop)
	}
}

// handedOverLocked marks the kept answer to id, if any, as handed to an
// agent. Called with r.mu held.
func (h *Hub) handedOverLocked(r *room, id string) {
	m := r.missed[id]
	if m == nil {
		return
	}
	delete(r.missed, id)
	r.missedBytes -= m.bytes
	if i := slices.Index(r.missedOrder, id); i >= 0 {
		r.missedOrder = slices.Delete(r.missedOrder, i, i+1)
	}
}

// keepIfUnread keeps p's answer for its project's next call when p was
// answered, as if delivered, in the moment its only caller's call ended:
// that caller never reads it. The kept answer is saved as undelivered, as
// one given after the call had gone. A caller that re-attaches by the ID
// gets it from the settled outcomes instead, and it is handed over once.
func (h *Hub) keepIfUnread(r *room, p *pending) {
	r.mu.Lock()
	if !p.overLocked() || p.reply == nil || p.reason == ReasonUndelivered || p.waiters > 1 || p.req.WithdrawOnLeave {
		r.mu.Unlock()
		return // not answered, kept already, or another caller had it
	}
	if s := r.settled[p.req.ID]; s != nil {
		s.delivered = false // its caller had it, and did not read it
	}
	r.mu.Unlock()
	if !h.own("mark of an answer its call did not read", p.req.ID) {
		return
	}
	defer h.writes.Done()
	h.keepUnheard(r, p.req.ID)
	h.log.Info("an answer came as its call ended: kept for the project's next call", "kind", p.req.Kind, "id", p.req.ID)
}

// withdrawLeft withdraws p, whose last caller left and cannot come back
// for the answer (Request.WithdrawOnLeave); the clients are told.
func (h *Hub) withdrawLeft(r *room, p *pending) {
	r.mu.Lock()
	alone := r.pending[p.req.ID] == p && p.waiters <= 0
	r.mu.Unlock()
	if alone && h.settle(r, p, nil, ErrWithdrawn, ReasonAbandoned) == nil {
		h.log.Info("request withdrawn: its caller left and takes no missed answers", "kind", p.req.Kind, "id", p.req.ID)
	}
}

// Over the records: an answer written with the note ReasonUndelivered is kept by every
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
// request id (whose outcome is s): a kept answer is handed
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
// cannot be read leaves the caller its answer, as before the cluster,
// but one NATS cannot be asked about (ErrUnreachable) does not: given
// unmarked, the answer would stay kept for the project's next call too.
// The caller tries again (Connect's Unavailable) until it is marked.
//
// An answer written as delivered (no note) is marked handed over too: its
// holder may not have heard it yet (paused, or cut from NATS, while its
// agent gave up on it and came here), and would otherwise find no caller
// for it there and keep it for the project's next call, which some
// instance could hand over before this one's mark of it reached it.
func (h *Hub) reattachKept(r *room, id string) error {
	ctx, cancel := h.sharedCtx(context.Background())
	_, rec, err := h.update(ctx, r, id, func(rec *SharedRecord) bool {
		if rec.ClosedNote != ReasonUndelivered && (rec.ClosedNote != "" || rec.Status != store.Answered) {
			return false
		}
		rec.ClosedNote, rec.Taken = ReasonHandedOver, false
		return true
	})
	cancel()
	if err != nil {
		h.log.Warn("cannot record an answer's hand-over", "id", id, "err", err)
		if errors.Is(err, ErrUnreachable) {
			return fmt.Errorf("record an answer's hand-over: %w", err)
		}
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
		h.keepSettledLocked(r, rec.ID, settledOf(rec.Record), cutoff)
		h.sweepLaterLocked(r)
	}
	switch {
	case rec.Status == store.Answered && rec.ClosedNote == ReasonUndelivered && r.missed[rec.ID] == nil:
		if s := r.settled[rec.ID]; s != nil && s.delivered {
			// A caller here had it before its holder, which had none,
			// kept it: handed over, not kept again.
			h.handOverLater(r, rec.ID)
		} else {
			h.keepMissedLocked(r, pendingFrom(token, rec), replyOf(rec.Record), rec.ClosedAt, rec.Bytes())
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
