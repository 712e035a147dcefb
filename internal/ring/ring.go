// Package ring keeps the last values pushed, oldest first, for replay to
// a client that comes back: bounded by their count and, as an owner
// needs, by their bytes, their age and a budget of bytes shared with
// other rings. What it lets go is always the oldest, so what it keeps is
// a run of consecutive values.
package ring

import (
	"sync/atomic"
	"time"
)

// Bounds say what a Ring keeps. A zero bound is no bound.
type Bounds[T any] struct {
	Count int           // values
	Bytes int64         // their Size, summed
	Size  func(T) int64 // a value's bytes, for Bytes and Pool
	Age   time.Duration // Trim lets go of a value older than Age by its Time
	Time  func(T) time.Time
	Pool  *Pool // bytes shared with other rings: past its Max, a Push or Trim gives up its own oldest
}

// Pool is a budget of bytes that rings share. Held is safe for
// concurrent use; each ring's owner guards its ring.
type Pool struct {
	Max  int64 // 0: no bound, the bytes are only counted
	held atomic.Int64
}

// Held is the bytes the pool's rings hold.
func (p *Pool) Held() int64 { return p.held.Load() }

// Ring is the last values pushed. Its owner's lock guards it.
type Ring[T any] struct {
	b     Bounds[T]
	buf   []T // grows to Count, then wraps
	start int // index of the oldest
	n     int
	bytes int64
}

// New returns an empty ring with bounds b.
func New[T any](b Bounds[T]) *Ring[T] { return &Ring[T]{b: b} }

// Len counts the values kept.
func (r *Ring[T]) Len() int { return r.n }

// At returns the i-th oldest value kept.
func (r *Ring[T]) At(i int) T { return r.buf[(r.start+i)%len(r.buf)] }

// Bytes is the Size of the values kept, summed.
func (r *Ring[T]) Bytes() int64 { return r.bytes }

// Push keeps v as the newest, then lets the oldest go while the ring is
// over its count, bytes or pool (v itself, when it alone is over them).
func (r *Ring[T]) Push(v T) {
	if r.b.Count > 0 && r.n == r.b.Count {
		r.drop()
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.start+r.n)%len(r.buf)] = v
	r.n++
	r.count(r.size(v))
	for r.n > 0 && r.overBytes() {
		r.drop()
	}
}

// Trim lets the oldest go while it is older than Age at now, or the ring
// is over its bytes or pool.
func (r *Ring[T]) Trim(now time.Time) {
	for r.n > 0 && (r.overBytes() || r.b.Age > 0 && now.Sub(r.b.Time(r.At(0))) > r.b.Age) {
		r.drop()
	}
}

// Shift lets the oldest value go and returns it, for an owner whose
// bounds need more than Bounds say (to know what went); false when the
// ring is empty.
func (r *Ring[T]) Shift() (T, bool) {
	var v T
	if r.n == 0 {
		return v, false
	}
	v = r.At(0)
	r.drop()
	return v, true
}

// Clear lets every value go, and gives its bytes back to the pool.
func (r *Ring[T]) Clear() {
	r.count(-r.bytes)
	r.buf, r.start, r.n = nil, 0, 0
}

func (r *Ring[T]) size(v T) int64 {
	if r.b.Size == nil {
		return 0
	}
	return r.b.Size(v)
}

func (r *Ring[T]) count(n int64) {
	r.bytes += n
	if r.b.Pool != nil {
		r.b.Pool.held.Add(n)
	}
}

func (r *Ring[T]) overBytes() bool {
	return r.b.Bytes > 0 && r.bytes > r.b.Bytes ||
		r.b.Pool != nil && r.b.Pool.Max > 0 && r.b.Pool.held.Load() > r.b.Pool.Max
}

// drop lets the oldest go; its slot is cleared, so nothing keeps what it
// referred to.
func (r *Ring[T]) drop() {
	var zero T
	r.count(-r.size(r.buf[r.start]))
	r.buf[r.start] = zero
	r.start = (r.start + 1) % len(r.buf)
	r.n--
}

// grow makes room for one more, up to Count, the oldest first.
func (r *Ring[T]) grow() {
	c := max(2*len(r.buf), 8)
	if r.b.Count > 0 {
		c = min(c, r.b.Count)
	}
	buf := make([]T, c)
	for i := range r.n {
		buf[i] = r.At(i)
	}
	r.buf, r.start = buf, 0
}
