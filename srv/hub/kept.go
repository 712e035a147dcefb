package hub

import (
	"errors"
	"sort"
)

// What a device is pushed at login when it never asks for the pending
// list (the older web UI), and what the room remembers of the cards such
// a device shows when its connection drops, so that it is not pushed
// them twice and is told how they settled meanwhile.

// PushPending sends c the requests of token that were pending before it
// joined (event number upTo, from Join) and are still pending, oldest
// first, as the notes that announced them: for clients that never ask
// for the pending list. Requests asked since reached c when they were.
//
// The notes sent cost at most budget in all (0: no bound), each cost(note),
// what it is to c's door (its frames): the connection's send queue takes
// only so many before it counts the client as too slow, and a client
// dropped for the push would be pushed the same again when it comes back.
// Past the bound the newest requests that fit are sent.
//
// Requests that a device of c's nickname was given on a connection that
// dropped (Kept) are left out: it still shows them. Those of them that
// settled meanwhile are told first, as the notes that announced their
// outcome (missedOutcomes), within the same bound: such a client never asks
// whether a card still waits. It returns the IDs pushed, and how many
// requests (pending or settled) were left out for the bound.
func (h *Hub) PushPending(token string, c Client, upTo uint64, budget int, cost func(*Note) int) (pushed []string, left int) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock() // sent under the lock: an outcome settled later is queued after
	shows := r.kept[c.Nickname()]
	delete(r.kept, c.Nickname())
	ps := make([]*pending, 0, len(r.pending))
	for _, p := range r.pending {
		if _, had := shows[p.req.ID]; p.shown && p.seq <= upTo && !had {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].createdAt.Before(ps[j].createdAt) })
	notes := r.missedOutcomesLocked(token, shows)
	n := 0
	for i, f := range notes {
		if budget > 0 && n+cost(f) > budget {
			left = len(notes) - i
			break
		}
		n += cost(f)
		if !c.Send(f) {
			return nil, len(notes) - i + len(ps)
		}
	}
	asked := make([]*Note, len(ps))
	from := len(ps)
	for from > 0 {
		f := requestNote(NoteAsked, ps[from-1])
		if budget > 0 && n+cost(f) > budget {
			break
		}
		from--
		asked[from], n = f, n+cost(f)
	}
	for i, f := range asked[from:] {
		if !c.Send(f) {
			return pushed, left + from
		}
		pushed = append(pushed, ps[from+i].req.ID)
	}
	return pushed, left + from
}

// missedOutcomesLocked returns, for each request of shows (a device's
// cards, from Kept) that is no longer pending, the note that announced
// its outcome, oldest request first: the answer when the outcome is known
// (the request itself, or the outcomes kept for re-attaching callers),
// else its closing with its reason, or a generic one when even that is
// forgotten. Called with r.mu held.
func (r *room) missedOutcomesLocked(token string, shows map[string]*pending) []*Note {
	type card struct {
		id string
		p  *pending
	}
	var gone []card
	for id, p := range shows {
		if q := r.pending[id]; q != nil && q.shown {
			continue // still pending: the card is right as it is
		}
		gone = append(gone, card{id, p})
	}
	sort.Slice(gone, func(i, j int) bool {
		a, b := gone[i].p, gone[j].p
		switch {
		case a != nil && b != nil && !a.createdAt.Equal(b.createdAt):
			return a.createdAt.Before(b.createdAt)
		case (a == nil) != (b == nil):
			return b == nil // the ones known first
		}
		return gone[i].id < gone[j].id
	})
	out := make([]*Note, 0, len(gone))
	for _, g := range gone {
		out = append(out, r.outcomeNoteLocked(token, g.id, g.p))
	}
	return out
}

// outcomeNoteLocked is the note that announced how request id (p, when
// known) settled. Called with r.mu held.
func (r *room) outcomeNoteLocked(token, id string, p *pending) *Note {
	var (
		rep    *Reply
		err    error
		reason string
		known  bool
	)
	if p != nil && p.overLocked() {
		rep, err, reason, known = p.reply, p.err, p.reason, true
	} else if s := r.settled[id]; s != nil {
		rep, err, reason, known = s.reply, s.err, s.reason, true
		if p == nil {
			p = &pending{req: Request{ID: id, Kind: s.kind}, token: token}
		}
	}
	if p == nil {
		p = &pending{req: Request{ID: id}, token: token}
	}
	if known && rep != nil {
		n := requestNote(NoteAnswered, p)
		n.Reply = rep
		return n
	}
	switch {
	case reason != "":
	case errors.Is(err, ErrTimeout):
		reason = "timeout"
	case known:
		reason = "cancelled"
	default:
		reason = NoteNoLongerPending
	}
	n := requestNote(NoteClosed, p)
	n.Reason = reason
	return n
}

// NoteNoLongerPending is the reason told to a device that shows a request
// whose outcome is no longer known.
const NoteNoLongerPending = "no longer pending"

// KeptByRoom returns what Kept remembers, by room (the store's digest of
// its token) and nickname, for the next start of the server (SetKept):
// a server that restarts is such a client's connection dropping.
func (h *Hub) KeptByRoom() map[string]map[string][]string {
	h.mu.Lock()
	rooms := make([]*room, 0, len(h.rooms))
	for _, r := range h.rooms {
		rooms = append(rooms, r)
	}
	h.mu.Unlock()
	out := make(map[string]map[string][]string)
	for _, r := range rooms {
		r.mu.Lock()
		for nick, ids := range r.kept {
			if out[r.digest] == nil {
				out[r.digest] = make(map[string][]string)
			}
			for id := range ids {
				out[r.digest][nick] = append(out[r.digest][nick], id)
			}
		}
		r.mu.Unlock()
	}
	return out
}

// SetKept restores, for the rooms of tokens, what KeptByRoom returned
// before a restart (at most maxKept nicknames a room).
func (h *Hub) SetKept(tokens []string, kept map[string]map[string][]string) {
	for _, t := range tokens {
		r := h.room(t)
		byNick := kept[r.digest]
		r.mu.Lock()
		for nick, ids := range byNick {
			if len(r.kept) >= maxKept {
				break
			}
			if r.kept == nil {
				r.kept = make(map[string]map[string]*pending)
			}
			had := make(map[string]*pending, len(ids))
			for _, id := range ids {
				had[id] = r.pending[id] // nil when it settled before the restart
			}
			r.kept[nick] = had
		}
		r.mu.Unlock()
	}
}

// maxKept bounds the nicknames a room remembers for Kept.
const maxKept = 64

// Kept notes that c, a client that never asks for the pending list, lost
// its connection without closing it (the network dropped, the server
// shut down): such a client (upstream's web UI) comes back under the same
// nickname with the cards it had and adds every request frame as a new
// card. What c had, and is still pending, is the requests pushed to it and
// those announced after it joined (event upTo); PushPending leaves them out
// at the next login of that nickname. Call it before Leave.
func (h *Hub) Kept(token string, c Client, upTo uint64, pushed []string) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	had := make(map[string]*pending)
	for _, id := range pushed {
		if p := r.pending[id]; p != nil && p.shown {
			had[id] = p
		}
	}
	for id, p := range r.pending {
		if p.shown && p.seq > upTo {
			had[id] = p
		}
	}
	nick := c.Nickname()
	if _, ok := r.kept[nick]; !ok && len(r.kept) >= maxKept {
		for k := range r.kept { // forget one: that device may see a card twice
			delete(r.kept, k)
			break
		}
	}
	if r.kept == nil {
		r.kept = make(map[string]map[string]*pending)
	}
	r.kept[nick] = had
}
