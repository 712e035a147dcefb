package hub

import (
	"time"

	"google.golang.org/protobuf/proto"

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
// they are among a room's last replayEvents, younger than replayAge, and
// within replayBytes. An answer's event holds its images (a /ws frame
// may be 16 MiB): the count alone let a room keep gigabytes.
const (
	replayEvents = 1024
	replayAge    = 5 * time.Minute
	replayBytes  = 32 << 20
)

// event is a numbered request event kept for replay: its notes (a
// request shown and its agent's status may be one event).
type event struct {
	seq   uint64
	notes []*Note
	at    time.Time
}

// eventBytes is what e holds for replay: its texts and answers (the
// door's encoding of each note, made once, about as much again). An
// answer counts whole, as encoded: its meta, and fields a client sent
// that this server does not know, which its contents carry on, weigh as
// its images do.
func eventBytes(e event) int64 {
	var n int
	for _, note := range e.notes {
		n += len(note.Request.Text)
		if note.Reply == nil {
			continue
		}
		for k, v := range note.Reply.Meta {
			n += len(k) + len(v)
		}
		for _, c := range note.Reply.Contents {
			n += proto.Size(c)
		}
	}
	return int64(n)
}

// events keeps the last events, oldest first, in a ring: a new event
// overwrites the oldest instead of moving the others. The newest is
// kept whatever its size or age; the others go once over replayBytes or
// older than replayAge at the next push, and their age is checked again
// as they are replayed: an old one means a resync.
type events struct {
	r       *ring.Ring[event] // nil until the first event
	dropped uint64            // the number of the last event let go
}

func (q *events) push(e event) {
	if q.r == nil {
		q.r = ring.New(ring.Bounds[event]{Count: replayEvents, Size: eventBytes})
	}
	if q.r.Len() == replayEvents {
		q.dropped = q.r.At(0).seq
	}
	q.r.Push(e)
	for q.r.Len() > 1 && (q.r.Bytes() > replayBytes || e.at.Sub(q.r.At(0).at) > replayAge) {
		old, _ := q.r.Shift()
		q.dropped = old.seq
	}
}

// trim lets go of the events older than the replay window at now, the
// newest too: a device that comes back later resyncs anyway.
func (q *events) trim(now time.Time) {
	for q.r != nil && q.r.Len() > 0 && now.Sub(q.r.At(0).at) > replayAge {
		old, _ := q.r.Shift()
		q.dropped = old.seq
	}
}

func (q *events) len() int {
	if q.r == nil {
		return 0
	}
	return q.r.Len()
}

// at returns the i-th oldest event.
func (q *events) at(i int) event { return q.r.At(i) }
