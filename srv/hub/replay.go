package hub

import "time"

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
// new event overwrites the oldest instead of moving the others.
type events struct {
	buf     []event // grows to replayEvents, then wraps
	start   int     // index of the oldest once full
	dropped uint64  // the number of the last event overwritten
}

func (q *events) push(e event) {
	if len(q.buf) < replayEvents {
		q.buf = append(q.buf, e)
		return
	}
	q.dropped = q.buf[q.start].seq
	q.buf[q.start] = e
	q.start = (q.start + 1) % len(q.buf)
}

func (q *events) len() int { return len(q.buf) }

// at returns the i-th oldest event.
func (q *events) at(i int) *event { return &q.buf[(q.start+i)%len(q.buf)] }
