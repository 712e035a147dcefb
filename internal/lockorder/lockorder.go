// Package lockorder gives the server's mutexes their place in the lock
// order, and checks it in tests.
//
// A goroutine takes locks in increasing level only: holding a lock of one
// level, it may take locks of higher levels, never one of the same or a
// lower level. levels.go is the order (docs/architecture.md explains it).
// Code that follows it cannot deadlock on these locks.
//
// The check is off unless a test turns it on (Main, or Enable); then every
// Lock looks up what its goroutine holds and records an inversion as a
// violation, with both places. Off, a Lock costs one atomic load more than
// a sync.Mutex's.
package lockorder

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Level is a place in the lock order: the types in levels.go.
type Level interface {
	// Order is the level's rank (lower is taken first) and its name.
	Order() (rank int, name string)
}

// Mutex is a sync.Mutex at level L. The zero value is unlocked.
type Mutex[L Level] struct {
	mu sync.Mutex
}

// Lock locks m, after checking, when the check is on, that its goroutine
// holds no lock of L's level or a later one.
func (m *Mutex[L]) Lock() {
	if !enabled.Load() {
		m.mu.Lock()
		return
	}
	var l L
	rank, name := l.Order()
	g := goid()
	check(g, rank, name)
	m.mu.Lock()
	push(g, m, rank, name)
}

// Unlock unlocks m.
func (m *Mutex[L]) Unlock() {
	if enabled.Load() {
		pop(m)
	}
	m.mu.Unlock()
}

var enabled atomic.Bool

// Enable turns the check on, for the rest of the process: tests only.
func Enable() { enabled.Store(true) }

// Pause turns the check off until tb (a benchmark) ends: a benchmark
// measures the product, where the check is off.
func Pause(tb interface{ Cleanup(func()) }) {
	was := enabled.Swap(false)
	tb.Cleanup(func() { enabled.Store(was) })
}

// Main runs a package's tests (m is TestMain's *testing.M) with the check
// on, and fails them if any goroutine took its locks out of order.
func Main(m interface{ Run() int }) {
	Enable()
	code := m.Run()
	if vs := Violations(); len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "lock order violated %d times (see internal/lockorder/levels.go):\n", len(vs))
		for _, v := range vs {
			fmt.Fprintln(os.Stderr, v)
		}
		code = 1
	}
	os.Exit(code)
}

type held struct {
	m     any
	rank  int
	name  string
	where []uintptr // where it was taken
}

var (
	mu         sync.Mutex
	holding    = map[uint64][]held{} // by goroutine
	violations []string
)

const maxViolations = 20

func check(g uint64, rank int, name string) {
	mu.Lock()
	defer mu.Unlock()
	for _, h := range holding[g] {
		if h.rank >= rank && len(violations) < maxViolations {
			violations = append(violations, fmt.Sprintf("%s (level %d) taken while holding %s (level %d)\n-- %s taken at:\n%s-- %s held since:\n%s",
				name, rank, h.name, h.rank, name, format(callers()), h.name, format(h.where)))
		}
	}
}

func push(g uint64, m any, rank int, name string) {
	where := callers()
	mu.Lock()
	holding[g] = append(holding[g], held{m: m, rank: rank, name: name, where: where})
	mu.Unlock()
}

// pop forgets m, held by this goroutine or, unlocked on another one's
// behalf, by any.
func pop(m any) {
	g := goid()
	mu.Lock()
	defer mu.Unlock()
	if drop(g, m) {
		return
	}
	for other := range holding {
		if drop(other, m) {
			return
		}
	}
}

func drop(g uint64, m any) bool {
	hs := holding[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].m == m {
			hs = append(hs[:i], hs[i+1:]...)
			if len(hs) == 0 {
				delete(holding, g)
			} else {
				holding[g] = hs
			}
			return true
		}
	}
	return false
}

// Violations lists the inversions seen since the check was turned on.
func Violations() []string {
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), violations...)
}

// goid is the running goroutine's id, read from its stack's header
// ("goroutine 18 [running]:"): slow, and only when the check is on.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return n
}

func callers() []uintptr {
	pcs := make([]uintptr, 24)
	return pcs[:runtime.Callers(4, pcs)]
}

func format(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		fmt.Fprintf(&b, "\t%s\n\t\t%s:%d\n", f.Function, f.File, f.Line)
		if !more {
			return b.String()
		}
	}
}
