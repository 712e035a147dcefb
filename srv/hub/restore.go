package hub

import (
	"context"
	"time"

	"github.com/agentassistant/agentassistant/srv/store"
)

// Restore loads what the store kept, as the first changes of the local
// records (local.go), applied as any change is (Apply): pending requests
// come back pending (orphaned until their agent re-attaches, or withdrawn
// after OrphanGrace; expired ones time out; those whose caller takes no
// missed answers are withdrawn at once), recent outcomes come back for
// re-attaching callers, answers no agent has taken yet come back for the
// next call of their project; the devices are told of requests that could
// not be restored (lost.go). tokens are the server's tokens: records of
// any other token are left alone. Call it before serving; in a cluster it
// does nothing (the cluster's watch brings the records).
func (h *Hub) Restore(tokens []string) (pendingN, settledN int, err error) {
	if h.local == nil || h.local.db == nil {
		return 0, 0, nil
	}
	byRoom := make(map[string]string, len(tokens))
	for _, t := range tokens {
		byRoom[h.room(t).digest] = t // known, for its records to be applied
	}
	now := h.now()
	if _, err := h.local.db.Prune(now.Add(-h.history)); err != nil {
		return 0, 0, err
	}
	last, err := h.local.restore(func(rec store.Record) bool {
		switch _, ok := byRoom[rec.Room]; {
		case !ok:
			return false
		case rec.Status == store.Pending:
			if !rec.WithdrawOnLeave && (rec.TimeoutSeconds <= 0 || now.Before(rec.Deadline)) {
				pendingN++ // else withdrawn, or timed out, as it is applied
			}
			return true
		case !rec.ClosedAt.Before(now.Add(-h.retention)):
			settledN++
			return true
		}
		// History only, unless an answer still kept for its agent.
		return h.keptForAgent(rec, now)
	})
	if err != nil {
		return 0, 0, err
	}
	h.Following(last)
	lostN := h.restoreLost(byRoom)
	h.log.Info("restored requests", "pending", pendingN, "settled", settledN, "lost", lostN)
	h.pruneOnce.Do(func() {
		if h.own("history pruning", "") {
			go h.pruneHistory()
		}
	})
	return pendingN, settledN, nil
}

// pruneEvery is how often a running server deletes the history past
// HistoryRetention: a server runs for weeks, and Restore prunes only
// what was past it at start.
const pruneEvery = time.Hour

// pruneHistory deletes the history past HistoryRetention every
// pruneEvery, until Close, which waits for it (own).
func (h *Hub) pruneHistory() {
	defer h.writes.Done()
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-t.C:
		}
		n, err := h.local.db.Prune(h.now().Add(-h.history))
		switch {
		case err != nil:
			h.log.Error("history not pruned", "err", err)
		case n > 0:
			h.log.Info("history pruned", "deleted", n, "older_than", h.history)
		}
	}
}

// Past is a settled request, as the history lists it.
type Past struct {
	Request           Request
	AskedAt, ClosedAt time.Time
	// Status is the store's: store.Answered, store.TimedOut or
	// store.Cancelled.
	Status string
	// Reply is the answer; Reason why it was closed without one.
	Reply  *Reply
	Reason string
}

// History pages through the settled requests of token, newest first,
// from the records (SharedHistory).
func (h *Hub) History(token string, before time.Time, limit int) ([]Past, bool, error) {
	sh, ok := h.shared.(SharedHistory)
	if !ok {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	recs, more, err := sh.History(ctx, store.Room(token), before, limit)
	cancel()
	if err != nil {
		return nil, false, err
	}
	out := make([]Past, len(recs))
	for i, rec := range recs {
		out[i] = Past{Request: requestOf(rec), AskedAt: rec.CreatedAt, ClosedAt: rec.ClosedAt, Status: rec.Status}
		if rec.Status == store.Answered {
			out[i].Reply = replyOf(rec)
		} else {
			out[i].Reason = rec.ClosedNote
		}
	}
	return out, more, nil
}

// ClearHistory deletes the settled requests of token from the records
// (SharedHistory); a cluster's keeps the answers still kept for an absent
// agent, until handed over.
func (h *Hub) ClearHistory(token string) (int, error) {
	sh, ok := h.shared.(SharedHistory)
	if !ok {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	now := h.now()
	return sh.ClearHistory(ctx, store.Room(token), func(rec SharedRecord) bool { return h.keptForAgent(rec.Record, now) })
}

// SharedHistory is a Shared store that reads a room's history from the
// cluster's records themselves (srv/cluster/history.go): every instance
// pages through the same records, and a clear on one is a clear on all.
type SharedHistory interface {
	// History returns up to limit settled records of room created before
	// before, newest first, and whether older ones exist.
	History(ctx context.Context, room string, before time.Time, limit int) ([]store.Record, bool, error)
	// ClearHistory deletes the settled records of room except those keep
	// (when not nil) says to keep, and returns how many it deleted.
	// Pending records always stay.
	ClearHistory(ctx context.Context, room string, keep func(SharedRecord) bool) (int, error)
}

// keptForAgent says whether rec is an answer still kept for its absent
// agent (missed.go): a clear leaves it until it is handed over, so
// the answer reaches the agent's next call.
func (h *Hub) keptForAgent(rec store.Record, now time.Time) bool {
	return rec.Status == store.Answered && rec.ClosedNote == ReasonUndelivered && !rec.ClosedAt.Before(now.Add(-h.missedFor))
}
