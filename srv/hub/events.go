package hub

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The core's typed events: what happened to a request, told to whoever
// is not a room's client (metrics today; push and channels subscribe the
// same way). They carry no wire format: each subscriber encodes its own.
//
// An event is emitted once in the cluster, by the instance where it
// happened: Asked where the agent's call came in and its record was
// saved, an outcome where it was written. Subscribers are called on the
// goroutine that made the change, after the room's clients were sent
// their notes and outside every lock; a subscriber must not block (it
// queues what takes time on a goroutine it owns).

// EventKind says what happened.
type EventKind uint8

// The kinds of Event.
const (
	// Asked: a request is saved and shown.
	Asked EventKind = iota + 1
	// Answered: a person's answer is saved; the first answer wins, so
	// there is one per request.
	Answered
	// Withdrawn: the agent cancelled, left, or the request was refused.
	Withdrawn
	// TimedOut: its deadline passed with no answer.
	TimedOut
)

var eventKindNames = [...]string{Asked: "asked", Answered: "answered", Withdrawn: "withdrawn", TimedOut: "timed_out"}

// String is the kind's name as the metrics label it.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "unknown"
}

// Event is one change of a request.
type Event struct {
	Kind EventKind
	// Token names the room. A subscriber keeps it to itself: it is never
	// logged or sent.
	Token   string
	Request Request
	// AskedAt is when the request was made; At when this happened.
	AskedAt, At time.Time
	// Reply is the answer (Answered); Reason why it was withdrawn or
	// timed out.
	Reply  *Reply
	Reason string
	// Again: Asked told once more, by the instance of a cluster that
	// took the request over (its agent re-attached here) from the one
	// that asked it, whose telling may not have gone out (killed
	// first). A subscriber whose telling replaces itself (a push under
	// the request's tag) tells it again; the others pass.
	Again bool
	// Saved is how long the store took to make this change durable.
	Saved time.Duration
}

// subscribers are read on every change without a lock, written (copied)
// on Subscribe.
type subscribers struct { // mu is held alone: nothing is taken under it
	mu   sync.Mutex
	subs atomic.Pointer[[]*subscriber]
}

type subscriber struct{ fn func(Event) }

// Subscribe calls fn with every event from now on, until the returned
// function is called. fn must not block.
func (h *Hub) Subscribe(fn func(Event)) (unsubscribe func()) {
	s := &subscriber{fn: fn}
	e := &h.subs
	e.mu.Lock()
	defer e.mu.Unlock()
	next := []*subscriber{s}
	if cur := e.subs.Load(); cur != nil {
		next = append(slices.Clone(*cur), s)
	}
	e.subs.Store(&next)
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if cur := e.subs.Load(); cur != nil {
			rest := slices.DeleteFunc(slices.Clone(*cur), func(o *subscriber) bool { return o == s })
			e.subs.Store(&rest)
		}
	}
}

// emit tells every subscriber. Called outside every lock.
func (h *Hub) emit(ev Event) {
	subs := h.subs.subs.Load()
	if subs == nil {
		return
	}
	for _, s := range *subs {
		s.fn(ev)
	}
}

// emitOutcome tells the subscribers of a settled request's outcome.
func (h *Hub) emitOutcome(p *pending, rep *Reply, err error, reason string, at time.Time, saved time.Duration) {
	if h.subs.subs.Load() == nil {
		return
	}
	ev := Event{Token: p.token, Request: p.req, AskedAt: p.createdAt, At: at, Reason: reason, Saved: saved}
	switch {
	case rep != nil:
		ev.Kind, ev.Reply = Answered, rep
	case errors.Is(err, ErrTimeout):
		ev.Kind = TimedOut
	default:
		ev.Kind = Withdrawn
	}
	h.emit(ev)
}
