package hub

import (
	"context"
	"errors"
	"time"

	"github.com/agentassistant/agentassistant/srv/store"
)

// Outcome is how a request was settled, as a channel's follow-up tells
// it after the event itself was missed (a restart, an instance gone).
type Outcome struct {
	// Kind is Answered, Withdrawn or TimedOut; Reply the answer
	// (Answered); Reason why it was withdrawn or timed out; At when.
	Kind   EventKind
	Reply  *Reply
	Reason string
	At     time.Time
}

// Outcome is how the request id of token was settled, while its outcome
// is kept (Retention) or its record is (on disk, or in a cluster's
// bucket); false when it is pending or not known.
func (h *Hub) Outcome(token, id string) (Outcome, bool) {
	r := h.room(token)
	r.mu.Lock()
	s := r.settled[id]
	r.mu.Unlock()
	switch {
	case s != nil:
	case h.local == nil:
		ctx, cancel := h.sharedCtx(context.Background())
		defer cancel()
		if rec, _, err := h.shared.Get(ctx, r.digest, id); err == nil && rec.Status != store.Pending {
			s = rec.outcome()
		}
	case h.local.db != nil:
		// Settled longer ago than outcomes are kept (a server stopped
		// for a while): its record on disk tells.
		if rec, ok, err := h.local.db.Find(r.digest, id); err == nil && ok && rec.Status != store.Pending {
			s = outcomeOf(rec)
		}
	}
	if s == nil {
		return Outcome{}, false
	}
	o := Outcome{Reply: s.reply, Reason: s.reason, At: s.at}
	switch {
	case s.reply != nil:
		o.Kind = Answered
	case errors.Is(s.err, ErrTimeout):
		o.Kind = TimedOut
	default:
		o.Kind = Withdrawn
	}
	return o, true
}

// Forgotten reports whether the store holds no record of the request id
// of token any more (a history cleared, a budget's eviction), so that
// its outcome will never be known; false when it holds one, or cannot
// say just now.
func (h *Hub) Forgotten(token, id string) bool {
	r := h.room(token)
	if h.local != nil {
		if h.local.db == nil {
			return false // in memory only: nothing to ask
		}
		_, ok, err := h.local.db.Find(r.digest, id)
		return err == nil && !ok
	}
	ctx, cancel := h.sharedCtx(context.Background())
	defer cancel()
	_, _, err := h.shared.Get(ctx, r.digest, id)
	return errors.Is(err, ErrRecordMissing)
}
