package hub

// fanLocked queues a broadcast of a request event's frames to the room's
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
func (r *room) fanLocked(frames [][]byte, except string) func() {
	cs := r.clientsLocked()
	prev := r.fanTail
	done := make(chan struct{})
	r.fanTail = done
	return func() {
		if prev != nil {
			<-prev
		}
		broadcast(cs, frames, except)
		close(done)
	}
}
