package hub

import (
	"errors"
	"sort"
)

// A device's cards: the requests it shows. A door that remembers what a
// device showed when its connection dropped (the older web UI, which
// never asks for the pending list, srv/inbox) holds them as Cards, and
// has the hub tell the device, as it comes back, what it missed.

// Card is a request as a device shows it. Its outcome stays known to the
// card's holder after the room forgot it (Retention).
type Card struct {
	ID string
	p  *pending // nil when not known here (remembered across a restart)
}

// Shown returns c's cards of the requests of token still pending that c
// was given: those pushed to it (CatchUp) and those announced after it
// joined (event upTo).
func (h *Hub) Shown(token string, upTo uint64, pushed []string) []Card {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Card
	for _, id := range pushed {
		if p := r.pending[id]; p != nil && p.shown && p.seq <= upTo { // later ones next
			out = append(out, Card{id, p})
		}
	}
	for id, p := range r.pending {
		if p.shown && p.seq > upTo {
			out = append(out, Card{id, p})
		}
	}
	return out
}

// Cards returns the cards of the requests ids of token, remembered across
// a restart: those settled before it are known by ID only.
func (h *Hub) Cards(token string, ids []string) []Card {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Card, len(ids))
	for i, id := range ids {
		out[i] = Card{id, r.pending[id]}
	}
	return out
}

// CatchUp sends c, a client that never asks for the pending list, the
// requests of token that were pending before it joined (event number
// upTo, from Join) and are still pending, oldest first, as the notes
// that announced them. Requests asked since reached c when they were.
//
// The requests of shows, c's cards from before (Shown), are left out:
// it still shows them. Those of them that settled meanwhile are told
// first, as the notes that announced their outcome: such a client never
// asks whether a card still waits.
//
// The notes sent cost at most budget in all (0: no bound), each cost(note),
// what it is to c's door (its frames): the connection's send queue takes
// only so many before it counts the client as too slow, and a client
// dropped for the push would be pushed the same again when it comes back.
// Past the bound the newest requests that fit are sent. It returns the IDs
// pushed, and how many requests (pending or settled) were left out for the
// bound.
func (h *Hub) CatchUp(token string, c Client, upTo uint64, shows []Card, budget int, cost func(*Note) int) (pushed []string, left int) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock() // sent under the lock: an outcome settled later is queued after
	had := make(map[string]bool, len(shows))
	for _, s := range shows {
		had[s.ID] = true
	}
	ps := make([]*pending, 0, len(r.pending))
	for _, p := range r.pending {
		if p.shown && p.seq <= upTo && !had[p.req.ID] {
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
// cards) that is no longer pending, the note that announced
// its outcome, oldest request first: the answer when the outcome is known
// (the request itself, or the outcomes kept for re-attaching callers),
// else its closing with its reason, or a generic one when even that is
// forgotten. Called with r.mu held.
func (r *room) missedOutcomesLocked(token string, shows []Card) []*Note {
	var gone []Card
	seen := make(map[string]bool, len(shows))
	for _, s := range shows {
		if q := r.pending[s.ID]; (q != nil && q.shown) || seen[s.ID] {
			continue // still pending: the card is right as it is
		}
		seen[s.ID] = true
		gone = append(gone, s)
	}
	sort.Slice(gone, func(i, j int) bool {
		a, b := gone[i].p, gone[j].p
		switch {
		case a != nil && b != nil && !a.createdAt.Equal(b.createdAt):
			return a.createdAt.Before(b.createdAt)
		case (a == nil) != (b == nil):
			return b == nil // the ones known first
		}
		return gone[i].ID < gone[j].ID
	})
	out := make([]*Note, 0, len(gone))
	for _, g := range gone {
		out = append(out, r.outcomeNoteLocked(token, g.ID, g.p))
	}
	return out
}

// outcomeNoteLocked is the note that announced how request id (p, when
// known) settled. Called with r.mu held.
func (r *room) outcomeNoteLocked(token, id string, p *pending) *Note {
	var s *settled // the outcome, when known
	if p != nil && p.overLocked() {
		s = &settled{reply: p.reply, err: p.err, reason: p.reason}
	} else if s = r.settled[id]; s != nil && p == nil {
		p = &pending{req: Request{ID: id, Kind: s.kind}, token: token}
	}
	if p == nil {
		p = &pending{req: Request{ID: id}, token: token}
	}
	if s != nil && s.reply != nil {
		n := requestNote(NoteAnswered, p)
		n.Reply = s.reply
		return n
	}
	n := requestNote(NoteClosed, p)
	switch {
	case s == nil:
		n.Reason = ReasonNoLongerPending
	case s.reason != "":
		n.Reason = s.reason
	case errors.Is(s.err, ErrTimeout):
		n.Reason = "timeout"
	default:
		n.Reason = "cancelled"
	}
	return n
}

// ReasonNoLongerPending is the reason told to a device that shows a request
// whose outcome is no longer known.
const ReasonNoLongerPending = "no longer pending"
