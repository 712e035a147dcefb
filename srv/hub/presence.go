package hub

import "time"

// Presence in a room: up to presenceBatch changes are announced one by one,
// more as one online-users list. A room of more than bigRoom clients (far
// beyond a person's devices) gets a bare "changed" notice instead, at most
// every bigRoomDelay: telling everyone about everyone is N² bytes however
// it is framed, so clients of big rooms ask for the list when they want it.
const (
	presenceBatch = 16
	bigRoom       = 64
	bigRoomDelay  = 250 * time.Millisecond
)

type presenceChange struct {
	c      Client
	status string
	at     time.Time
}

// announceLocked queues a presence change; the first one of a batch arms
// the flush.
func (r *room) announceLocked(c Client, status string, now time.Time) {
	r.presence = append(r.presence, presenceChange{c: c, status: status, at: now})
	if !r.flushing {
		r.flushing = true
		d := r.delay
		if len(r.clients) > bigRoom {
			d = max(d, bigRoomDelay)
		}
		time.AfterFunc(d, r.flushPresence)
	}
}

// flushPresence announces the gathered changes: each one to everyone but
// its subject when there are few, else the whole online list, one note,
// to everyone.
func (r *room) flushPresence() {
	r.mu.Lock()
	changes := r.presence
	r.presence = nil
	r.flushing = false
	cs := r.clientsLocked()
	r.mu.Unlock()
	if len(cs) == 0 || len(changes) == 0 {
		return
	}
	if len(cs) > bigRoom {
		broadcast(cs, []*Note{{Kind: NoteCrowd, At: changes[len(changes)-1].at}}, "")
		return
	}
	if len(changes) <= presenceBatch {
		for _, ch := range changes {
			broadcast(cs, []*Note{{Kind: NotePresence, User: userOf(ch.c), Status: ch.status, At: ch.at}}, ch.c.ID())
		}
		return
	}
	broadcast(cs, []*Note{{Kind: NoteOnline, Users: r.onlineUsers()}}, "")
}
