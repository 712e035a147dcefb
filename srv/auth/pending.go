package auth

import (
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
)

// Pending caps the connections that have not shown the token yet, in all
// and per address (Key), so that nobody without the token can make the
// server hold more than a bounded number of them: each may cost a read
// buffer up to the pre-login frame limit until its login deadline. A
// connection counts from before its upgrade until it logs in or ends.
// Logged-in connections never count.
//
// At the cap a newcomer is not refused: the oldest connection still
// waiting (of its address, or of all) is evicted to make room, so a flood
// that never logs in cannot fill the table for good. Only where nothing
// can be evicted is the newcomer refused. A client that logs in with its
// first frame may still be evicted before that frame arrives, by a flood
// fast enough to turn the cap over within its round trip.
//
// A WebSocket whose upgrade presented a valid token (AcquireUpgrade) is
// no stranger, yet its login frame is still to come: it waits apart,
// perAddr at most per token and not counted in the whole, and only
// another of the same token's may take its place. However fast strangers
// turn over, they never evict a device that presents the token in its
// upgrade. The zero value is not usable; use NewPending.
type Pending struct {
	mu    lockorder.Mutex[lockorder.Pending]
	order *Slots[func()] // by address Key; the slot's evict, nil: cannot be evicted
	known *Slots[func()] // with a valid upgrade token, by token; no bound in all

	// For the metrics: newcomers refused, and waiting connections
	// evicted to make room.
	refused, evicted atomic.Uint64
}

// Errors of Acquire: the server as a whole, or this address, has as many
// connections waiting to log in as it takes, and none can be evicted.
var (
	ErrPendingFull = errors.New("too many connections are waiting to log in; try again shortly")
	ErrPendingAddr = errors.New("too many connections from this address are waiting to log in; try again shortly")
)

// Defaults of NewPending.
const (
	DefaultMaxPending        = 256
	DefaultMaxPendingPerAddr = 64
)

// NewPending takes up to max connections waiting to log in, perAddr of
// them from one address (defaults 256 and 64).
func NewPending(max, perAddr int) *Pending {
	opt.Default(&max, DefaultMaxPending)
	opt.Default(&perAddr, DefaultMaxPendingPerAddr)
	return &Pending{order: NewSlots[func()](max, perAddr), known: NewSlots[func()](0, perAddr)}
}

// AcquireUpgrade counts a WebSocket upgrade as Acquire does, or, when its
// token proved valid before the upgrade (UpgradeTokenOf its context),
// among the token's own: perAddr of them at most, the token's oldest
// evicted past that.
func (p *Pending) AcquireUpgrade(r *http.Request, evict func()) (release func(), err error) {
	tok := UpgradeTokenOf(r.Context())
	if p == nil || tok == "" {
		return p.Acquire(r.RemoteAddr, evict)
	}
	return p.acquire(p.known, tok, evict)
}

// Acquire counts a new connection from remote; at the cap it evicts the
// oldest connection waiting (its evict is called, on this goroutine, after
// its place is taken back), or says why the newcomer must be refused when
// none can be. evict closes the connection; nil means it cannot be
// evicted. release uncounts it; it may be called any number of times. A
// nil Pending takes everything.
func (p *Pending) Acquire(remote string, evict func()) (release func(), err error) {
	if p == nil {
		return func() {}, nil
	}
	return p.acquire(p.order, Key(remote), evict)
}

// acquire takes a slot of t under key; the metrics count strangers only.
func (p *Pending) acquire(t *Slots[func()], key string, evict func()) (release func(), err error) {
	s := &Slot[func()]{Key: key, Value: evict}
	p.mu.Lock()
	victim, err := t.Add(s, func(evict func()) bool { return evict != nil })
	p.mu.Unlock()
	if err != nil {
		if t == p.order {
			p.refused.Add(1)
		}
		return nil, err
	}
	if victim != nil {
		if t == p.order {
			p.evicted.Add(1)
		}
		victim.Value()
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		s.Remove()
	}, nil
}

// Len is the number of connections waiting to log in without a valid
// upgrade token: those the caps bound.
func (p *Pending) Len() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}

// RefusePending answers an upgrade Acquire refused, before the upgrade:
// 429 when this address has too many connections waiting, 503 when the
// server has.
func RefusePending(w http.ResponseWriter, err error) {
	code := http.StatusServiceUnavailable
	if errors.Is(err, ErrPendingAddr) {
		code = http.StatusTooManyRequests
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, err.Error(), code)
}

// Turned reports how many connections waiting to log in were refused,
// and how many evicted to make room for a newcomer, since the start.
func (p *Pending) Turned() (refused, evicted uint64) {
	if p == nil {
		return 0, 0
	}
	return p.refused.Load(), p.evicted.Load()
}
