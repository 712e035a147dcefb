package auth

import (
	"net"
	"sync"
	"time"
)

// Limiter counts failed logins per remote address. Past Max failures in
// Window, the address is refused outright until the window ends, so a
// token cannot be guessed by trying. Tokens carry 192 bits, so this is
// defence in depth, and the window is short so a locked-out person is not
// locked out for long. The zero value is not usable; use NewLimiter.
type Limiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]*limitEntry
}

type limitEntry struct {
	fails int
	reset time.Time
}

const maxLimiterEntries = 10000

// NewLimiter allows max failures per window per address (defaults 20 and
// one minute).
func NewLimiter(max int, window time.Duration) *Limiter {
	if max <= 0 {
		max = 20
	}
	if window <= 0 {
		window = time.Minute
	}
	return &Limiter{max: max, window: window, now: time.Now, entries: make(map[string]*limitEntry)}
}

// Key reduces a remote address ("ip:port") to what is limited: the IP.
func Key(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// Allowed reports whether the address may attempt a login now.
func (l *Limiter) Allowed(addr string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[Key(addr)]
	return e == nil || e.fails < l.max || l.now().After(e.reset)
}

// Failed records a failed login from the address.
func (l *Limiter) Failed(addr string) {
	if l == nil {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := Key(addr)
	e := l.entries[k]
	if e == nil || now.After(e.reset) {
		if len(l.entries) >= maxLimiterEntries {
			for key, old := range l.entries {
				if now.After(old.reset) {
					delete(l.entries, key)
				}
			}
			if len(l.entries) >= maxLimiterEntries {
				return // under a flood from many addresses: stop tracking rather than grow
			}
		}
		e = &limitEntry{reset: now.Add(l.window)}
		l.entries[k] = e
	}
	e.fails++
}
