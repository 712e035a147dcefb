package hub

import (
	"sync"
	"time"
)

// fanLocked queues a broadcast of a request event's notes to the room's
// clients but the one with id except, and returns the function that sends
// it, to be called once r.mu is released. Called with r.mu held, right
// after emitLocked.
//
// A room's request events go out one after another, in the order of their
// numbers: each waits until the one before it has been written to every
// client. So every device sees them in order, and a question reaches the
// last device before the notification of a quick device's answer to it
// starts competing with it for the CPU and the sockets (the answer comes
// back while the question is still going out to a crowd).
func (r *room) fanLocked(notes []*Note, except string) func() {
	cs := r.clientsLocked()
	prev := r.fanTail
	done := make(chan struct{})
	r.fanTail = done
	hurry := r.later
	r.later = nil
	return func() {
		if hurry != nil {
			hurry() // the note waiting for its time goes first, now
		}
		if prev != nil {
			<-prev
		}
		broadcast(cs, notes, except)
		close(done)
	}
}

// settledNoteDelay is how long the note that a request was settled
// (answered elsewhere, timed out, withdrawn) may wait before it goes out.
// Nobody is waiting for it, and it is the second broadcast of the same
// request: sent at once, it competes with the question it settles, which
// may still be on its way into a crowd's devices (the sockets have it,
// the devices' machines are still taking it in), and it holds up the
// agent's answer behind as many writes as there are devices. A person
// cannot see 20 ms; a crowd's question can be taken in within them.
const settledNoteDelay = 20 * time.Millisecond

// fanLaterLocked is fanLocked for a settled note: its broadcast starts
// settledNoteDelay from now, or as the room's next event goes out,
// whichever comes first; so order is kept and nothing waits longer than
// it did. A note no other client is to get goes at once. It returns the
// function to call once r.mu is released, as fanLocked does. The timer
// runs the broadcast on its own goroutine; nothing else waits for it.
func (r *room) fanLaterLocked(notes []*Note, except string) func() {
	others := len(r.clients)
	if r.clients[except] != nil {
		others--
	}
	send := r.fanLocked(notes, except)
	if others <= 0 {
		return send
	}
	var once sync.Once
	run := func() { once.Do(send) }
	r.later = run
	return func() { time.AfterFunc(settledNoteDelay, run) }
}
