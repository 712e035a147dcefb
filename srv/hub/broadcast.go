package hub

import (
	"runtime"
	"slices"
	"sync"
)

// broadcast sends the notes, in order, to every client but the one with
// id except.
func broadcast(cs []Client, notes []*Note, except string) {
	// Sends to idle connections are writes on this goroutine; a crowd is
	// split among one goroutine per CPU, which the writes keep busy.
	parts := min(runtime.GOMAXPROCS(0), len(cs)/crowdPart)
	if parts < 2 {
		sendAll(cs, notes, except)
		return
	}
	var wg sync.WaitGroup
	size := (len(cs) + parts - 1) / parts
	for part := range slices.Chunk(cs, size) {
		wg.Go(func() { sendAll(part, notes, except) })
	}
	wg.Wait()
}

// crowdPart is the fewest clients worth a goroutine of their own in a
// broadcast.
const crowdPart = 128

func sendAll(cs []Client, notes []*Note, except string) {
	for _, c := range cs {
		if c.ID() != except {
			for _, n := range notes {
				c.Send(n)
			}
		}
	}
}
