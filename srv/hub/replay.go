package hub

import (
	"time"

	"github.com/agentassistant/agentassistant/internal/ring"
)

// Replay: a room's request events are numbered, and the last ones kept,
// so a client that comes back within the window gets what it missed.

// Resume is what a returning client last saw: the epoch of the server and
// the last Seq.
type Resume struct {
	Epoch string
	From  uint64
}

// Replay window: a client that comes back gets the events it missed if
// they are among a room's last replayEvents and younger than replayAge.
const (
	replayEvents = 1024
	replayAge    = 5 * time.Minute
)

// event is a numbered request event kept for replay: its notes (a
// request shown and its agent's status may be one event).
type event struct {
	seq   uint64
	notes []*Note
	at    time.Time
}

// events keeps the last replayEvents events, oldest first, in a ring: a
// new event overwrites the oldest instead of moving the others. Their age
// is checked as they are replayed: an old one means a resync.
type events struct {
	r       *ring.Ring[event] // nil until the first event
	dropped uint64            // the number of the last event overwritten
}

func (q *events) push(e event) {
	if q.r == nil {
		q.r = ring.New(ring.Bounds[event]{Count: replayEvents})
	}
	if q.r.Len() == replayEvents {
		q.dropped = q.r.At(0).seq
	}
	q.r.Push(e)
}

func (q *events) len() int {
	if q.r == nil {
		return 0
	}
	return q.r.Len()
}

// at returns the i-th oldest event.
func (q *events) at(i int) event { return q.r.At(i) }
