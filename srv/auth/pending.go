package auth

import (
	"container/list"
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/agentassistant/agentassistant/internal/lockorder"
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
	max, perAddr int

	mu      lockorder.Mutex[lockorder.Pending]
	order   list.List // of *pendingEntry, oldest first
	byAddr  map[string]int
	known   list.List      // of *pendingEntry with a valid upgrade token, oldest first
	byToken map[string]int // the known ones by token

	// For the metrics: newcomers refused, and waiting connections
	// evicted to make room.
	refused, evicted atomic.Uint64
}

type pendingEntry struct {
	key   string // the address's Key, or the token
	known bool   // in known, keyed by token
	evict func() // nil: cannot be evicted
	el    *list.Element
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
	if max <= 0 {
		max = DefaultMaxPending
	}
	if perAddr <= 0 {
		perAddr = DefaultMaxPendingPerAddr
	}
	return &Pending{max: max, perAddr: perAddr, byAddr: make(map[string]int), byToken: make(map[string]int)}
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
	p.mu.Lock()
	var victim *pendingEntry
	if p.byToken[tok] >= p.perAddr {
		if victim = p.oldestLocked(&p.known, tok); victim == nil {
			p.mu.Unlock()
			return nil, ErrPendingAddr
		}
		p.removeLocked(victim)
	}
	e := &pendingEntry{key: tok, known: true, evict: evict}
	e.el = p.known.PushBack(e)
	p.byToken[tok]++
	p.mu.Unlock()
	if victim != nil {
		victim.evict()
	}
	return p.releaser(e), nil
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
	k := Key(remote)
	p.mu.Lock()
	var victim *pendingEntry
	switch {
	case p.byAddr[k] >= p.perAddr:
		if victim = p.oldestLocked(&p.order, k); victim == nil {
			p.mu.Unlock()
			p.refused.Add(1)
			return nil, ErrPendingAddr
		}
	case p.order.Len() >= p.max:
		if victim = p.oldestLocked(&p.order, ""); victim == nil {
			p.mu.Unlock()
			p.refused.Add(1)
			return nil, ErrPendingFull
		}
	}
	if victim != nil {
		p.removeLocked(victim)
	}
	e := &pendingEntry{key: k, evict: evict}
	e.el = p.order.PushBack(e)
	p.byAddr[k]++
	p.mu.Unlock()
	if victim != nil {
		p.evicted.Add(1)
		victim.evict()
	}
	return p.releaser(e), nil
}

// oldestLocked is the oldest evictable entry of l with key, or of all
// when key is "".
func (p *Pending) oldestLocked(l *list.List, key string) *pendingEntry {
	for el := l.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*pendingEntry); e.evict != nil && (key == "" || e.key == key) {
			return e
		}
	}
	return nil
}

// releaser uncounts e when called, any number of times.
func (p *Pending) releaser(e *pendingEntry) func() {
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.removeLocked(e)
	}
}

// removeLocked uncounts e, once.
func (p *Pending) removeLocked(e *pendingEntry) {
	if e.el == nil {
		return
	}
	l, count := &p.order, p.byAddr
	if e.known {
		l, count = &p.known, p.byToken
	}
	l.Remove(e.el)
	e.el = nil
	if count[e.key]--; count[e.key] <= 0 {
		delete(count, e.key)
	}
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
