package ring

import (
	"testing"
	"testing/synctest"
	"time"
)

type item struct {
	n    int
	size int64
	at   time.Time
}

func sizeOf(i item) int64     { return i.size }
func timeOf(i item) time.Time { return i.at }
func values(r *Ring[item]) []int {
	var out []int
	for i := range r.Len() {
		out = append(out, r.At(i).n)
	}
	return out
}

func same(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCount: past Count the oldest goes, and the ring still reads oldest
// first once it has wrapped.
func TestCount(t *testing.T) {
	r := New(Bounds[item]{Count: 3})
	for n := 1; n <= 5; n++ {
		r.Push(item{n: n})
	}
	if got := values(r); !same(got, []int{3, 4, 5}) {
		t.Fatalf("kept %v, want [3 4 5]", got)
	}
	r.Push(item{n: 6})
	if got := values(r); !same(got, []int{4, 5, 6}) {
		t.Fatalf("kept %v, want [4 5 6]", got)
	}
}

// TestBytes: past Bytes the oldest go, down to the newest alone.
func TestBytes(t *testing.T) {
	r := New(Bounds[item]{Count: 100, Bytes: 10, Size: sizeOf})
	r.Push(item{n: 1, size: 4})
	r.Push(item{n: 2, size: 4})
	if got := values(r); !same(got, []int{1, 2}) || r.Bytes() != 8 {
		t.Fatalf("kept %v (%d bytes)", got, r.Bytes())
	}
	r.Push(item{n: 3, size: 4})
	if got := values(r); !same(got, []int{2, 3}) || r.Bytes() != 8 {
		t.Fatalf("kept %v (%d bytes), want [2 3] in 8", got, r.Bytes())
	}
	r.Push(item{n: 4, size: 20})
	if r.Len() != 0 || r.Bytes() != 0 {
		t.Fatalf("kept %v (%d bytes): one larger than the bound is not kept", values(r), r.Bytes())
	}
}

// TestPool: rings sharing a pool are bounded together; each gives up its
// own oldest, and Clear gives back what it held.
func TestPool(t *testing.T) {
	p := &Pool{Max: 10}
	a := New(Bounds[item]{Count: 100, Size: sizeOf, Pool: p})
	b := New(Bounds[item]{Count: 100, Size: sizeOf, Pool: p})
	a.Push(item{n: 1, size: 4})
	a.Push(item{n: 2, size: 4})
	b.Push(item{n: 3, size: 4}) // 12 in the pool: b gives up its own
	if p.Held() != 8 || !same(values(a), []int{1, 2}) || b.Len() != 0 {
		t.Fatalf("pool %d, a %v, b %v", p.Held(), values(a), values(b))
	}
	a.Clear()
	if p.Held() != 0 || a.Len() != 0 {
		t.Fatalf("pool %d after Clear, a %v", p.Held(), values(a))
	}
	b.Push(item{n: 4, size: 4})
	if p.Held() != 4 || !same(values(b), []int{4}) {
		t.Fatalf("pool %d, b %v", p.Held(), values(b))
	}
}

// TestAge: Trim lets go of what is older than Age.
func TestAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Bounds[item]{Count: 100, Age: time.Minute, Time: timeOf})
		r.Push(item{n: 1, at: time.Now()})
		time.Sleep(40 * time.Second)
		r.Push(item{n: 2, at: time.Now()})
		time.Sleep(30 * time.Second)
		r.Trim(time.Now())
		if got := values(r); !same(got, []int{2}) {
			t.Fatalf("kept %v after 70s, want [2]", got)
		}
		time.Sleep(time.Minute)
		r.Trim(time.Now())
		if r.Len() != 0 {
			t.Fatalf("kept %v after 130s", values(r))
		}
	})
}

// TestClearReleases: Clear leaves nothing behind, and the ring is usable.
func TestClearReleases(t *testing.T) {
	r := New(Bounds[item]{Count: 2, Size: sizeOf})
	r.Push(item{n: 1, size: 3})
	r.Push(item{n: 2, size: 3})
	r.Push(item{n: 3, size: 3})
	r.Clear()
	if r.Len() != 0 || r.Bytes() != 0 {
		t.Fatal("Clear kept something")
	}
	r.Push(item{n: 4, size: 3})
	if got := values(r); !same(got, []int{4}) {
		t.Fatalf("kept %v", got)
	}
}

// TestShift: Shift gives the oldest back and lets it go, bytes and pool
// with it.
func TestShift(t *testing.T) {
	pool := &Pool{}
	r := New(Bounds[item]{Size: func(i item) int64 { return i.size }, Pool: pool})
	r.Push(item{n: 1, size: 3})
	r.Push(item{n: 2, size: 4})
	if v, ok := r.Shift(); !ok || v.n != 1 || r.Len() != 1 || r.Bytes() != 4 || pool.Held() != 4 {
		t.Fatalf("Shift: %v %v; %d left, %d bytes, pool %d", v, ok, r.Len(), r.Bytes(), pool.Held())
	}
	r.Shift()
	if _, ok := r.Shift(); ok || r.Len() != 0 || pool.Held() != 0 {
		t.Fatalf("Shift of an empty ring: ok %v, %d left, pool %d", ok, r.Len(), pool.Held())
	}
}
