package auth

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestKey: the budget of failed logins belongs to what an attacker cannot
// multiply at will: every loopback address is this machine, an IPv6 /64
// is one network, and an IPv4 address seen through IPv6 is the address.
func TestKey(t *testing.T) {
	same := [][2]string{
		{"127.0.0.1:1000", "127.0.0.2:2000"},
		{"127.0.0.1:1000", "127.255.3.4:1"},
		{"127.0.0.1:1000", "[::1]:5"},
		{"127.0.0.1:1000", "[::ffff:127.0.0.9]:5"},
		{"[2001:db8:1:2::1]:1", "[2001:db8:1:2:ffff::9]:2"},
		{"[::ffff:10.0.0.1]:1", "10.0.0.1:2"},
		{"10.0.0.1:1", "10.0.0.1"},
		{"[fe80::1%eth0]:1", "[fe80::2%eth1]:1"},
	}
	for _, p := range same {
		if Key(p[0]) != Key(p[1]) {
			t.Errorf("Key(%s) = %q, Key(%s) = %q: want one budget", p[0], Key(p[0]), p[1], Key(p[1]))
		}
	}
	differ := [][2]string{
		{"10.0.0.1:1", "10.0.0.2:1"},
		{"[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1"},
		{"127.0.0.1:1", "10.0.0.1:1"},
	}
	for _, p := range differ {
		if Key(p[0]) == Key(p[1]) {
			t.Errorf("Key(%s) = Key(%s) = %q: want separate budgets", p[0], p[1], Key(p[0]))
		}
	}
}

// TestLimiterHoldsFailuresBack: within the budget nothing waits; past it
// the failures of one address are answered one every window/max, however
// many arrive at once, never more than a window late; a new window starts
// a new budget.
func TestLimiterHoldsFailuresBack(t *testing.T) {
	l := NewLimiter(3, time.Minute) // 20s apart past the budget
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := range 3 {
		if d := l.Failed("127.0.0.1:1"); d != 0 {
			t.Fatalf("failure %d within the budget held %s", i, d)
		}
	}
	// Four at the same instant, from two loopback addresses: one queue.
	for i, want := range []time.Duration{20 * time.Second, 40 * time.Second, time.Minute, time.Minute} {
		if d := l.Failed(fmt.Sprintf("127.0.0.%d:9", 1+i%2)); d != want {
			t.Errorf("failure %d past the budget held %s, want %s", i, d, want)
		}
	}
	if d := l.Failed("10.0.0.1:1"); d != 0 {
		t.Errorf("another address held %s", d)
	}
	now = now.Add(61 * time.Second)
	if d := l.Failed("127.0.0.1:1"); d != 0 {
		t.Errorf("a new window held %s", d)
	}

	// Fail waits through Hold, and not at all within the budget.
	var got []time.Duration
	l.Hold = func(d time.Duration, _ <-chan struct{}) { got = append(got, d) }
	l.Fail(nil, "10.0.0.2:1")
	l.Fail(nil, "10.0.0.2:1")
	l.Fail(nil, "10.0.0.2:1")
	l.Fail(nil, "10.0.0.2:1")
	if len(got) != 1 || got[0] != 20*time.Second {
		t.Errorf("held %v, want one of 20s", got)
	}
	// Without Hold, done ends the wait.
	l.Hold = nil
	done := make(chan struct{})
	close(done)
	l.Fail(done, "10.0.0.2:1")
}

func TestPending(t *testing.T) {
	p := NewPending(4, 2)
	var rel []func()
	for _, a := range []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.2:1", "10.0.0.2:2"} {
		r, err := p.Acquire(a, nil)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		rel = append(rel, r)
	}
	if _, err := p.Acquire("10.0.0.1:3", nil); !errors.Is(err, ErrPendingAddr) {
		t.Errorf("third from one address: %v", err)
	}
	if _, err := p.Acquire("10.0.0.3:1", nil); !errors.Is(err, ErrPendingFull) {
		t.Errorf("fifth in all: %v", err)
	}
	rel[0]()
	rel[0]() // twice is once
	if p.Len() != 3 {
		t.Errorf("Len = %d, want 3", p.Len())
	}
	if _, err := p.Acquire("10.0.0.3:1", nil); err != nil {
		t.Errorf("after a release: %v", err)
	}
	if _, err := p.Acquire("127.0.0.5:1", nil); !errors.Is(err, ErrPendingFull) {
		t.Errorf("full again: %v", err)
	}
	var none *Pending
	if r, err := none.Acquire("x", nil); err != nil || r == nil {
		t.Errorf("nil Pending: %v", err)
	}
}

// TestPendingEvictsTheOldest: at the cap a newcomer takes the place of
// the oldest connection still waiting (of its address, else of all), so a
// flood that never logs in cannot keep anyone out; only connections that
// cannot be evicted make it refuse.
func TestPendingEvictsTheOldest(t *testing.T) {
	p := NewPending(3, 2)
	var evicted []string
	acquire := func(name, addr string) func() {
		t.Helper()
		r, err := p.Acquire(addr, func() { evicted = append(evicted, name) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	acquire("a1", "10.0.0.1:1")
	acquire("b1", "10.0.0.2:1")
	acquire("a2", "10.0.0.1:2")
	acquire("a3", "10.0.0.1:3") // its address is full: a1 goes
	if want := []string{"a1"}; !slices.Equal(evicted, want) {
		t.Fatalf("evicted %v, want %v", evicted, want)
	}
	acquire("c1", "10.0.0.3:1") // the server is full: the oldest of all, b1, goes
	if want := []string{"a1", "b1"}; !slices.Equal(evicted, want) {
		t.Fatalf("evicted %v, want %v", evicted, want)
	}
	if p.Len() != 3 {
		t.Errorf("Len = %d, want 3", p.Len())
	}
	// Released ones are never evicted, and only evictable ones are.
	q := NewPending(2, 2)
	r1, _ := q.Acquire("10.0.0.1:1", func() { t.Error("a released connection was evicted") })
	r1()
	if _, err := q.Acquire("10.0.0.1:2", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Acquire("10.0.0.1:3", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Acquire("10.0.0.1:4", func() {}); !errors.Is(err, ErrPendingAddr) {
		t.Errorf("nothing evictable: %v, want ErrPendingAddr", err)
	}
}
