package hub

import (
	"context"
	"time"

	"github.com/agentassistant/agentassistant/srv/store"
)

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
// agent (sharedmissed.go): a clear leaves it until it is handed over, so
// the answer reaches the agent's next call.
func (h *Hub) keptForAgent(rec store.Record, now time.Time) bool {
	return rec.Status == store.Answered && rec.ClosedNote == ReasonUndelivered && !rec.ClosedAt.Before(now.Add(-h.missedFor))
}
