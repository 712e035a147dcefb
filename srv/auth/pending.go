package auth

import (
	"errors"
	"net/http"
	"sync"
)

// Pending caps the connections that have not shown the token yet, in all
// and per address (Key), so that nobody without the token can make the
// server hold more than a bounded number of them: each may cost a read
// buffer up to the pre-login frame limit until its login deadline. A
// connection counts from before its upgrade until it logs in or ends.
// Logged-in connections never count. The zero value is not usable; use
// NewPending.
type Pending struct {
	max, perAddr int

	mu     sync.Mutex
	total  int
	byAddr map[string]int
}

// Errors of Acquire: the server as a whole, or this address, has as many
// connections waiting to log in as it takes.
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
	return &Pending{max: max, perAddr: perAddr, byAddr: make(map[string]int)}
}

// Acquire counts a new connection from remote, or says why it must be
// refused. release uncounts it; it may be called any number of times.
// A nil Pending takes everything.
func (p *Pending) Acquire(remote string) (release func(), err error) {
	if p == nil {
		return func() {}, nil
	}
	k := Key(remote)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.byAddr[k] >= p.perAddr:
		return nil, ErrPendingAddr
	case p.total >= p.max:
		return nil, ErrPendingFull
	}
	p.total++
	p.byAddr[k]++
	var once sync.Once
	return func() { once.Do(func() { p.release(k) }) }, nil
}

func (p *Pending) release(k string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total--
	if p.byAddr[k]--; p.byAddr[k] <= 0 {
		delete(p.byAddr, k)
	}
}

// Len is the number of connections waiting to log in.
func (p *Pending) Len() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
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
