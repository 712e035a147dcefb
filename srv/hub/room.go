package hub

import (
	"context"
	"sort"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// room is everything under one token: its clients (membership, in join
// order: this file), its requests (request.go), the outcomes kept for
// re-attaching callers (settled.go), the answers kept for absent agents
// (missed.go), its numbered events (replay.go) and its presence batching
// (presence.go).
type room struct {
	digest  string // the store's name for the room (a digest of its token)
	mu      lockorder.Mutex[lockorder.Room]
	clients map[string]Client
	joined  map[string]uint64 // client id -> join order
	joins   uint64
	// snapshot is clients as a slice for broadcasts; nil after a change
	// and rebuilt on the next broadcast.
	snapshot []Client
	pending  map[string]*pending
	settled  map[string]*settled
	// settledOrder is the IDs of settled, oldest first; settledBytes
	// is what they cost (keptbytes.go).
	settledOrder []string
	settledBytes int64
	seq          uint64 // the last request event's number
	events       events // the last replayEvents of them
	// sweeper lets go of what the room keeps past its time, armed while
	// it keeps any (settled.go).
	sweeper  *time.Timer
	activity time.Time

	// lost is the requests that were pending here when the store was
	// found damaged and could not be restored, until a device dismisses
	// them (lost.go).
	lost []store.Lost

	// missed holds answers given while no agent waited, by request ID,
	// until an agent takes them (missed.go); missedOrder is their IDs,
	// oldest first; missedBytes is what they cost (keptbytes.go).
	missed      map[string]*missed
	missedOrder []string
	missedBytes int64

	// refused is the IDs of requests whose record this instance
	// gave up on (the agent was told they could not be saved), oldest
	// first, at most maxRefused: one that lands after all is withdrawn
	// (apply.go). Cluster mode only.
	refused []string
	// late: its looks for requests asked elsewhere and not heard yet
	// (heardLate). Cluster mode only.
	late lateLooks
	// asking counts, by request ID, this instance's asks that created
	// their record, from before it is written until they return: the
	// record may be shown, and answered, before the ask counts itself as
	// a waiter, and its caller is there all the same.
	asking map[string]int

	// Presence changes waiting to be announced, in order; the timer that
	// announces them is armed while the list is not empty.
	delay    time.Duration
	presence []presenceChange
	flushing bool

	// remote is the devices connected to the other instances of a
	// cluster (peers.go); nil in one process.
	remote map[string]*remote

	// fanTail is closed once the last request event queued (fanLocked)
	// has been sent to every client; nil before the first.
	fanTail chan struct{}
	// later starts the settled note waiting for its time (fan.go), if
	// one is; the next event's broadcast calls it first.
	later func()
}

// Join adds c to the room of token and tells the others it is online.
// welcome, when not nil, is called first, told whether the resume worked,
// for c's door to queue what a login is answered with; then c is sent,
// when it resumes within the replay window, the events it missed; all
// atomically with joining, so c misses nothing and gets nothing twice. It returns the number of the room's
// last event when c joined, for CatchUp.
func (h *Hub) Join(token string, c Client, welcome func(resumed bool), resume Resume) uint64 {
	seq, _ := h.JoinAtMost(token, 0, c, welcome, resume)
	return seq
}

// JoinAtMost is Join into a room of at most limit clients: when the room
// is full, c is not added, welcome is not called and ErrRoomFull is
// returned. The check and the join are one step, so a burst of logins
// cannot overshoot the limit.
func (h *Hub) JoinAtMost(token string, limit int, c Client, welcome func(resumed bool), resume Resume) (uint64, error) {
	r := h.room(token)
	resuming := resume.From > 0 && resume.Epoch == h.epoch // within this epoch
	var since, heard uint64
	if resuming {
		since, heard = h.seqs.window(context.Background(), resume.From)
	}
	now := h.now()
	r.mu.Lock()
	if limit > 0 && len(r.clients) >= limit {
		r.mu.Unlock()
		return 0, ErrRoomFull
	}
	var missed []*Note
	resumed := false
	if resuming {
		missed, resumed = r.replayLocked(resume.From, since, heard, now)
	}
	if welcome != nil {
		welcome(resumed)
	}
	for _, n := range missed {
		c.Send(n)
	}
	r.clients[c.ID()] = c
	r.activity = now
	r.joins++
	r.joined[c.ID()] = r.joins
	r.snapshot = nil
	r.announceLocked(c, wire.StatusConnected, now)
	seq := r.seq
	r.mu.Unlock()
	if h.peers != nil {
		h.peers.Joined(r.digest, c)
	}
	return seq, nil
}

// Leave removes c from the room of token and tells the others.
func (h *Hub) Leave(token string, c Client) {
	r := h.room(token)
	if r.leave(c, h.now()) && h.peers != nil {
		h.peers.Left(r.digest, c)
	}
}

// Rename tells the others of token that c, already in the room, has a new
// nickname (c.Nickname() returns it by now).
func (h *Hub) Rename(token string, c Client) {
	r := h.room(token)
	if r.rename(c, h.now()) && h.peers != nil {
		h.peers.Joined(r.digest, c)
	}
}

// PendingMessages lists the requests of token still waiting, oldest first,
// as the notes that show them (Gone set), and the number of the room's
// latest event, from which to resume.
func (h *Hub) PendingMessages(token string) ([]*Note, uint64) {
	r := h.room(token)
	r.mu.Lock()
	ps := make([]*pending, 0, len(r.pending))
	for _, p := range r.pending {
		if p.shown {
			ps = append(ps, p)
		}
	}
	seq := r.seq
	r.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].createdAt.Before(ps[j].createdAt) })
	out := make([]*Note, len(ps))
	for i, p := range ps {
		out[i] = requestNote(NoteAsked, p)
		out[i].Gone = p.gone.Load()
	}
	return out, seq
}

// Validity reports, for each id, whether it is still pending under token.
func (h *Hub) Validity(token string, ids []string) map[string]bool {
	r := h.room(token)
	out := make(map[string]bool, len(ids))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		p := r.pending[id]
		out[id] = p != nil && p.shown
	}
	return out
}

// Waiting reports whether the request id of token is pending here
// (waits), shown yet or not (in a cluster the asking instance shows it
// once its watch hears its record; it waits from its save on), and, once
// shown, its question told again (ev): a cluster's channel that finds
// its first send owed (its asker and the instance that took it over
// killed before they sent it) sends it from this.
func (h *Hub) Waiting(token, id string) (ev Event, shown, waits bool) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[id]
	if p == nil || !p.shown {
		return Event{}, false, p != nil
	}
	return Event{Kind: Asked, Again: true, Token: token, Request: p.req, AskedAt: p.createdAt, At: h.now()}, true, true
}

// Status reports the clients logged in under token and when the room last
// saw a login or a request event.
func (h *Hub) Status(token string) (clients int, lastActivity time.Time) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients), r.activity
}

// OnlineUsers lists the clients of token, earliest first.
func (h *Hub) OnlineUsers(token string) []User {
	return h.room(token).onlineUsers()
}

// leave removes c; false when it was not in the room.
func (r *room) leave(c Client, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clients[c.ID()] != c {
		return false
	}
	delete(r.clients, c.ID())
	delete(r.joined, c.ID())
	if len(r.clients) == 0 {
		// Maps never shrink: start afresh, or a crowd's buckets stay.
		r.clients, r.joined = make(map[string]Client), make(map[string]uint64)
	}
	r.snapshot = nil
	r.announceLocked(c, wire.StatusDisconnected, now)
	return true
}

// rename announces c again; false when it is not in the room.
func (r *room) rename(c Client, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clients[c.ID()] != c {
		return false
	}
	r.announceLocked(c, wire.StatusConnected, now)
	return true
}

func (r *room) clientsLocked() []Client {
	if r.snapshot == nil {
		r.snapshot = make([]Client, 0, len(r.clients))
		for _, c := range r.clients {
			r.snapshot = append(r.snapshot, c)
		}
	}
	return r.snapshot
}

// onlineUsers lists the room's clients in the order they joined.
func (r *room) onlineUsers() []User {
	r.mu.Lock()
	cs := append([]Client(nil), r.clientsLocked()...)
	order := make(map[string]uint64, len(cs))
	for _, c := range cs {
		order[c.ID()] = r.joined[c.ID()]
	}
	for _, m := range r.remote { // the other instances' devices
		cs = append(cs, m)
		order[m.u.ID] = m.order
	}
	r.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool { return order[cs[i].ID()] < order[cs[j].ID()] })
	out := make([]User, len(cs))
	for i, c := range cs {
		out[i] = userOf(c)
	}
	return out
}
