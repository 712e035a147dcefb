package auth

import (
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/opt"
)

// Limiter slows down guessing: it counts failed logins per address (see
// Key) and, past Max failures in Window, holds back the answer to each
// further failure, so that one address gets its failures answered no
// faster than one every Window/Max however many connections it opens.
// A correct token is never refused nor delayed: tokens carry 192 bits
// (or at least 8 characters when chosen by hand), so nobody can guess
// one at this rate, and a lockout would let any local program cut the
// person off from their agents. The zero value is not usable; use
// NewLimiter.
type Limiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	// Hold waits d, or until done is closed; nil means a timer. Tests
	// replace it to see what is held back and to release it.
	Hold func(d time.Duration, done <-chan struct{})

	mu      lockorder.Mutex[lockorder.Limiter]
	entries map[string]*limitEntry
}

type limitEntry struct {
	fails int
	reset time.Time // when the count starts again
	next  time.Time // when the next held-back failure may be answered
}

const maxLimiterEntries = 10000

// NewLimiter allows max failures per window per address without delay
// (defaults 20 and one minute).
func NewLimiter(max int, window time.Duration) *Limiter {
	opt.Default(&max, 20)
	opt.Default(&window, time.Minute)
	return &Limiter{max: max, window: window, now: time.Now, entries: make(map[string]*limitEntry)}
}

// Key reduces a remote address ("ip:port") to what one budget belongs
// to, something an attacker cannot multiply at will: every loopback
// address (127.0.0.0/8, ::1) is this one machine, an IPv6 address counts
// by its /64 (one network gets billions of addresses), an IPv4 address
// seen through IPv6 counts as itself.
func Key(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // the zone says which interface, not who
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.Is6():
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Failed records a failed login from addr and returns how long its answer
// is to be held back: nothing within the budget; past it, until the
// address's next turn, failures being answered one every Window/Max, and
// never more than Window.
func (l *Limiter) Failed(addr string) time.Duration {
	if l == nil {
		return 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := Key(addr)
	e := l.entries[k]
	if e == nil || now.After(e.reset) {
		if e == nil && len(l.entries) >= maxLimiterEntries {
			for key, old := range l.entries {
				if now.After(old.reset) && now.After(old.next) {
					delete(l.entries, key)
				}
			}
			if len(l.entries) >= maxLimiterEntries {
				return 0 // under a flood from many addresses: stop tracking rather than grow
			}
		}
		if e == nil {
			e = &limitEntry{}
			l.entries[k] = e
		}
		e.fails, e.reset = 0, now.Add(l.window)
	}
	e.fails++
	if e.fails <= l.max {
		return 0
	}
	turn := e.next
	if turn.Before(now) {
		turn = now
	}
	turn = turn.Add(l.window / time.Duration(l.max))
	hold := min(turn.Sub(now), l.window)
	e.next = now.Add(hold)
	return hold
}

// Fail records a failed login from addr and holds the caller back as
// long as Failed says, or until done is closed (the connection or the
// server ends). Call it before answering the failure.
func (l *Limiter) Fail(done <-chan struct{}, addr string) {
	d := l.Failed(addr)
	if d <= 0 {
		return
	}
	if l.Hold != nil {
		l.Hold(d, done)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}
