package lockorder

import (
	"strings"
	"sync"
	"testing"
)

func reset() {
	mu.Lock()
	violations = nil
	holding = map[uint64][]held{}
	mu.Unlock()
}

func TestOrder(t *testing.T) {
	Enable()
	n := 0 // what the locks guard
	// with runs inner with m held.
	with := func(m interface {
		Lock()
		Unlock()
	}, inner func()) {
		m.Lock()
		defer m.Unlock()
		n++
		inner()
	}
	nothing := func() {}
	for _, c := range []struct {
		name string
		take func()
		want string // in the violation; "" for none
	}{
		{"in order", func() {
			var a Mutex[RelaySession]
			var b Mutex[Room]
			var c Mutex[Store]
			with(&a, func() { with(&b, func() { with(&c, nothing) }) })
		}, ""},
		{"one after the other", func() {
			var a Mutex[Store]
			var b Mutex[Room]
			with(&a, nothing)
			with(&b, nothing)
		}, ""},
		{"inverted", func() {
			var a Mutex[Store]
			var b Mutex[Room]
			with(&a, func() { with(&b, nothing) })
		}, "hub.room.mu (level 40) taken while holding store.Store.mu (level 60)"},
		{"two of one level", func() {
			var a, b Mutex[Room]
			with(&a, func() { with(&b, nothing) })
		}, "hub.room.mu (level 40) taken while holding hub.room.mu (level 40)"},
		{"unlocked by another goroutine", func() {
			var a Mutex[Store]
			var b Mutex[Room]
			a.Lock()
			var wg sync.WaitGroup
			wg.Go(a.Unlock)
			wg.Wait()
			with(&b, nothing) // a is no longer held
		}, ""},
		{"other goroutines' locks do not count", func() {
			var a Mutex[Store]
			var b Mutex[Room]
			with(&a, func() {
				var wg sync.WaitGroup
				wg.Go(func() { with(&b, nothing) })
				wg.Wait()
			})
		}, ""},
	} {
		reset()
		c.take()
		vs := Violations()
		switch {
		case c.want == "" && len(vs) > 0:
			t.Errorf("%s: %v", c.name, vs)
		case c.want != "" && (len(vs) != 1 || !strings.HasPrefix(vs[0], c.want) || !strings.Contains(vs[0], "lockorder_test.go")):
			t.Errorf("%s: %q, want one violation %q naming where", c.name, vs, c.want)
		}
	}
	reset()
}

// The levels are distinct and in the order levels.go lists them.
func TestLevels(t *testing.T) {
	levels := []Level{BuiltinHosts{}, RelaySessions{}, RelaySession{}, BuiltinHost{}, LocalApply{}, LocalRecords{}, Rooms{}, Room{}, StudyLogs{},
		Store{}, IngressSessions{}, IngressSession{}, Pending{}, Limiter{}}
	last := 0
	for _, l := range levels {
		n, name := l.Order()
		if n <= last {
			t.Errorf("%s at %d, after %d", name, n, last)
		}
		last = n
	}
}

func BenchmarkLockUnchecked(b *testing.B) {
	enabled.Store(false)
	defer enabled.Store(true)
	var m Mutex[Room]
	n := 0
	for b.Loop() {
		m.Lock()
		n++
		m.Unlock()
	}
}
