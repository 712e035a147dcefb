package ring_test

import (
	"fmt"

	"github.com/agentassistant/agentassistant/internal/ring"
)

// A replay window keeps the last events, oldest first; past its count the
// oldest goes, so what is kept is always a run of consecutive events.
func ExampleRing() {
	r := ring.New(ring.Bounds[int]{Count: 3})
	for seq := 1; seq <= 5; seq++ {
		r.Push(seq)
	}
	for i := range r.Len() {
		fmt.Print(r.At(i), " ")
	}
	fmt.Println()
	// Output: 3 4 5
}

// Rings may share a budget of bytes: past it, the ring that pushes gives
// up its own oldest values.
func ExamplePool() {
	pool := &ring.Pool{Max: 10}
	size := func(s string) int64 { return int64(len(s)) }
	a := ring.New(ring.Bounds[string]{Size: size, Pool: pool})
	b := ring.New(ring.Bounds[string]{Size: size, Pool: pool})
	a.Push("hello")
	b.Push("world")
	b.Push("again") // over the pool's 10 bytes: b's oldest goes
	fmt.Println(a.Len(), b.Len(), pool.Held())
	// Output: 1 1 10
}
