package hub

import (
	"context"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Restore loads what the store kept: pending requests come back pending
// (orphaned until their agent re-attaches, or withdrawn after OrphanGrace;
// expired ones as timed out; those whose caller takes no missed answers
// withdrawn at once), recent outcomes come back for re-attaching
// callers, answers no agent has taken yet come back for the next call of
// their project; the devices are told of requests that could not be
// restored (lost.go). tokens are the server's tokens: records of any other token are
// left alone. Call it before serving.
func (h *Hub) Restore(tokens []string) (pendingN, settledN int, err error) {
	if h.store == nil {
		return 0, 0, nil
	}
	byRoom := make(map[string]string, len(tokens))
	for _, t := range tokens {
		byRoom[store.Room(t)] = t
	}
	now := h.now()
	if _, err := h.store.Prune(now.Add(-h.history)); err != nil {
		return 0, 0, err
	}
	var recs []store.Record
	if err := h.store.All(func(r store.Record) error {
		if _, ok := byRoom[r.Room]; ok {
			recs = append(recs, r)
		}
		return nil
	}); err != nil {
		return 0, 0, err
	}
	for _, rec := range recs {
		token := byRoom[rec.Room]
		r := h.room(token)
		req := requestOf(rec)
		if rec.Status != store.Pending {
			if rec.Status == store.Answered && rec.ClosedNote == NoteUndelivered && !rec.ClosedAt.Before(now.Add(-h.missedFor)) {
				h.restoreMissed(r, token, rec)
			}
			if rec.ClosedAt.Before(now.Add(-h.retention)) {
				continue // history only; too old to re-attach to
			}
			s := settledOf(rec)
			r.mu.Lock()
			r.keepSettled(rec.ID, s, now.Add(-h.retention))
			r.mu.Unlock()
			settledN++
			continue
		}
		p := &pending{req: req, sum: req.digest(), token: token, createdAt: rec.CreatedAt, deadline: rec.Deadline, done: make(chan struct{}), shown: true}
		r.mu.Lock()
		r.pending[rec.ID] = p
		if req.Timeout > 0 && !now.Before(rec.Deadline) {
			r.mu.Unlock()
			_ = h.settle(r, p, nil, ErrTimeout, "timeout") // not saved: it times out again at the next start
			continue
		}
		if req.WithdrawOnLeave {
			// Its caller's call ended with the server, and that caller
			// never comes back for an answer: as when its call drops.
			r.mu.Unlock()
			if h.settle(r, p, nil, ErrWithdrawn, NoteAbandoned) == nil {
				h.log.Info("request withdrawn: its caller left with the server and takes no missed answers", "kind", req.Kind, "id", req.ID)
			}
			continue
		}
		h.arm(r, p)
		h.orphanLocked(r, p)
		r.mu.Unlock()
		pendingN++
	}
	lostN := h.restoreLost(byRoom)
	h.log.Info("restored requests", "pending", pendingN, "settled", settledN, "lost", lostN)
	return pendingN, settledN, nil
}

// History pages through the settled requests of token, newest first: in
// cluster mode from the cluster's records (SharedHistory), else from the
// store.
func (h *Hub) History(token string, before time.Time, limit int) ([]*pb.HistoryItem, bool, error) {
	var (
		recs []store.Record
		more bool
		err  error
	)
	if sh, ok := h.shared.(SharedHistory); ok {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		recs, more, err = sh.History(ctx, store.Room(token), before, limit)
		cancel()
	} else if h.store != nil {
		recs, more, err = h.store.History(store.Room(token), before, limit)
	} else {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := make([]*pb.HistoryItem, 0, len(recs))
	for _, rec := range recs {
		p := &pending{req: requestOf(rec), token: token, createdAt: rec.CreatedAt}
		it := &pb.HistoryItem{MessageType: p.req.Kind.String(), CreatedAt: rec.CreatedAt.UnixMilli(), Status: rec.Status, ClosedAt: rec.ClosedAt.UnixMilli()}
		if p.req.Kind == wire.AskQuestion {
			it.AskQuestionRequest = askRequest(p)
		} else {
			it.TaskFinishRequest = taskRequest(p)
		}
		if rec.Status == store.Answered {
			rep := decodeReply(rec.Reply)
			it.Response = AskResponse(rec.ID, rep)
			it.AnsweredBy = rep.Nickname
		} else {
			it.Reason = rec.ClosedNote
		}
		out = append(out, it)
	}
	return out, more, nil
}

// ClearHistory deletes the settled requests of token. In cluster mode it
// deletes them from the cluster's records, but for answers still kept for
// an absent agent, which stay until handed over.
func (h *Hub) ClearHistory(token string) (int, error) {
	if sh, ok := h.shared.(SharedHistory); ok {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		return sh.ClearHistory(ctx, store.Room(token), h.keptForAgent)
	}
	if h.store == nil {
		return 0, nil
	}
	return h.store.Clear(store.Room(token))
}
