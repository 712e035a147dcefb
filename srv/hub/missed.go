package hub

import (
	"slices"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
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

// maxMissed caps the answers a room keeps for absent agents; past it the
// oldest is no longer offered (it stays in the history).
const maxMissed = 256

// missed is an answer kept for an absent agent.
type missed struct {
	p     *pending
	reply *Reply
	at    time.Time // when it was answered
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
// waited. Called with r.mu held.
func (h *Hub) keepMissedLocked(r *room, p *pending, rep *Reply, at time.Time) {
	id := p.req.ID
	if _, ok := r.missed[id]; !ok {
		// In order of answer time; restored ones may come in any order.
		i, _ := slices.BinarySearchFunc(r.missedOrder, at, func(x string, t time.Time) int { return r.missed[x].at.Compare(t) })
		r.missedOrder = slices.Insert(r.missedOrder, i, id)
	}
	r.missed[id] = &missed{p: p, reply: rep, at: at}
	h.pruneMissedLocked(r, h.now())
}

// pruneMissedLocked forgets kept answers past MissedRetention, and the
// oldest beyond maxMissed.
func (h *Hub) pruneMissedLocked(r *room, now time.Time) {
	cutoff := now.Add(-h.missedFor)
	drop := 0
	for drop < len(r.missedOrder) && (r.missed[r.missedOrder[drop]].at.Before(cutoff) || len(r.missedOrder)-drop > maxMissed) {
		if !r.missed[r.missedOrder[drop]].at.Before(cutoff) {
			h.log.Warn("too many answers kept for absent agents; the oldest is no longer offered", "id", r.missedOrder[drop])
		}
		delete(r.missed, r.missedOrder[drop])
		drop++
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
