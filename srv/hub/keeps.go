package hub

import "time"

// Keeps are the bounds within which a room still needs its settled
// records, as the local records keep them (local.go) and a room its
// outcomes and kept answers: a cluster's history budget, which cannot
// ask every instance what it holds, spares the records within them
// (srv/cluster/budget.go), so a server alone and a cluster evict the
// same.
type Keeps struct {
	// Retention is how long an outcome is kept for a caller that
	// re-attaches, of a room's newest MaxSettled within RetentionBytes.
	Retention      time.Duration
	RetentionBytes int64
	MaxSettled     int
	// MissedFor is how long an answer given while no agent waited is
	// kept for its project's next call, of a room's newest MaxMissed
	// within MissedBytes.
	MissedFor   time.Duration
	MissedBytes int64
	MaxMissed   int
}

// Keeps returns the hub's bounds on what a room keeps of its settled
// requests. The bytes are store.Record.Bytes'.
func (h *Hub) Keeps() Keeps {
	return Keeps{Retention: h.retention, RetentionBytes: h.retentionBytes, MaxSettled: maxSettled,
		MissedFor: max(h.retention, h.missedFor), MissedBytes: h.missedBytes, MaxMissed: maxMissed}
}
