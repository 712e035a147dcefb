package hub

import (
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
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

// event is a numbered request event kept for replay: its frames, more
// than one when it goes out under each generation's Cmd.
type event struct {
	seq    uint64
	frames [][]byte
	at     time.Time
}

// events keeps the last replayEvents events, oldest first, in a ring: a
// new event overwrites the oldest instead of moving the others. Their age
// is checked as they are replayed: an old one means a resync.
type events struct{ r *ring.Ring[event] } // nil until the first event

func (q *events) push(e event) {
	if q.r == nil {
		q.r = ring.New(ring.Bounds[event]{Count: replayEvents})
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

// emitLocked numbers a request event (its frames share the number), keeps
// it for replay and returns its encoding. Called with r.mu held, so numbers
// follow the order of events.
func (r *room) emitLocked(ms []*pb.WebsocketMessage, now time.Time) [][]byte {
	r.activity = now
	r.seq++
	bs := make([][]byte, len(ms))
	for i, m := range ms {
		m.Seq = r.seq
		bs[i] = marshal(m)
	}
	r.events.push(event{seq: r.seq, frames: bs, at: now})
	return bs
}

// replayLocked returns the events after from, or false when they are no
// longer all kept (the client needs a full resync).
func (r *room) replayLocked(from uint64, now time.Time) ([][]byte, bool) {
	if from > r.seq {
		return nil, false
	}
	if from == r.seq {
		return nil, true
	}
	n := r.events.len()
	if n == 0 || r.events.at(0).seq > from+1 {
		return nil, false
	}
	var out [][]byte
	for i := range n {
		if e := r.events.at(i); e.seq > from {
			if now.Sub(e.at) > replayAge {
				return nil, false
			}
			out = append(out, e.frames...)
		}
	}
	return out, true
}
