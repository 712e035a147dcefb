package hub

import (
	"slices"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
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

// Notes of answered records in the store.
const (
	// NoteUndelivered marks an answer given while no agent waited for it.
	NoteUndelivered = "undelivered"
	// NoteHandedOver marks such an answer once an agent has it.
	NoteHandedOver = "handed over"
	// NoteNotSaved closes a request its agent was told could not be
	// saved, whose write landed after all (cluster mode).
	NoteNotSaved = "not saved"
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
	if h.shared != nil {
		return h.takeMissedShared(r, project, except, limit)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h.pruneMissedLocked(r, h.now())
	var out []Missed
	for _, id := range r.missedOrder {
		m := r.missed[id]
		if m.p.req.ProjectDirectory != project || slices.Contains(except, id) {
			continue
		}
		out = append(out, Missed{Kind: m.p.req.Kind, ID: id, Text: m.p.req.Text, CreatedAt: m.p.createdAt, AnsweredAt: m.at, Reply: m.reply})
		if len(out) == limit {
			break
		}
	}
	for _, m := range out {
		h.handedOverLocked(r, m.ID)
		if s := r.settled[m.ID]; s != nil {
			s.takenElsewhere = true
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
	if h.store != nil {
		h.store.Enqueue(missedRecord(r, m, NoteHandedOver))
	}
}

// noticeLocked arms the timer that tells the clients no agent waits for
// p. Called with r.mu held, when p's last caller left.
func (h *Hub) noticeLocked(r *room, p *pending) {
	stopTimer(&p.notice)
	if p.gone.Load() {
		return
	}
	p.notice = time.AfterFunc(h.notice, func() {
		select {
		case <-h.quit:
			return
		default:
		}
		r.mu.Lock()
		if r.pending[p.req.ID] != p || p.waiters > 0 || p.gone.Load() {
			r.mu.Unlock()
			return
		}
		p.gone.Store(true)
		frame := r.emitLocked([]*pb.WebsocketMessage{agentStatusFrame(p, true)}, h.now())
		send := r.fanLocked(frame, "")
		r.mu.Unlock()
		send()
		h.log.Info("no agent waits for a request", "kind", p.req.Kind, "id", p.req.ID)
	})
}

// backLocked stops telling the clients p has no agent; it returns the
// frame to broadcast when they had been told. Called with r.mu held, when
// a caller re-attached.
func (h *Hub) backLocked(r *room, p *pending) [][]byte {
	stopTimer(&p.notice)
	if !p.gone.Load() {
		return nil
	}
	p.gone.Store(false)
	return r.emitLocked([]*pb.WebsocketMessage{agentStatusFrame(p, false)}, h.now())
}

// restoreMissed brings back an answer kept for an absent agent from the
// store.
func (h *Hub) restoreMissed(r *room, token string, rec store.Record) {
	req := Request{Kind: wire.Kind(rec.Kind), ID: rec.ID, ProjectDirectory: rec.ProjectDirectory, Text: rec.Text,
		Timeout: time.Duration(rec.TimeoutSeconds) * time.Second}
	p := &pending{req: req, sum: req.digest(), token: token, createdAt: rec.CreatedAt, deadline: rec.Deadline}
	r.mu.Lock()
	h.keepMissedLocked(r, p, decodeReply(rec.Reply), rec.ClosedAt)
	r.mu.Unlock()
}

// keepIfUnread keeps p's answer for its project's next call when p was
// answered, as if delivered, in the moment its only caller's call ended:
// that caller never reads it. The kept answer is saved as undelivered, as
// one given after the call had gone. A caller that re-attaches by the ID
// gets it from the settled outcomes instead, and it is handed over once.
func (h *Hub) keepIfUnread(r *room, p *pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !p.overLocked() || p.reply == nil || p.reason == NoteUndelivered || p.waiters != 1 || p.req.WithdrawOnLeave {
		return // not answered, kept already, or another caller had it
	}
	if _, kept := r.missed[p.req.ID]; kept {
		return
	}
	p.reason = NoteUndelivered
	now := h.now()
	h.keepMissedLocked(r, p, p.reply, now)
	if h.store != nil {
		h.store.Enqueue(missedRecord(r, r.missed[p.req.ID], NoteUndelivered))
	}
	h.log.Info("an answer came as its call ended: kept for the project's next call", "kind", p.req.Kind, "id", p.req.ID)
}

// withdrawLeft withdraws p, whose last caller left and cannot come back
// for the answer (Request.WithdrawOnLeave); the clients are told.
func (h *Hub) withdrawLeft(r *room, p *pending) {
	r.mu.Lock()
	alone := r.pending[p.req.ID] == p && p.waiters <= 0
	r.mu.Unlock()
	if alone && h.settle(r, p, nil, ErrWithdrawn, "abandoned") == nil {
		h.log.Info("request withdrawn: its caller left and takes no missed answers", "kind", p.req.Kind, "id", p.req.ID)
	}
}
